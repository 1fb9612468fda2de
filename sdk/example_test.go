package sdk_test

// The examples run (go test ./sdk) against the in-process bay of main_test.go; their output is
// checked.

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/sdk"
)

func ExampleClient_CreateSandbox() {
	ctx := context.Background()
	c, err := sdk.NewFromEnv() // SHIPYARD_ENDPOINT / SHIPYARD_TOKEN
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{Profile: "python-default", TTL: 3600 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Delete(context.WithoutCancel(ctx))
	// No container runs until the first call that needs one.
	fmt.Println(strings.HasPrefix(sb.ID, "sandbox-"), sb.Profile, sb.Status)
	// Output: true python-default idle
}

func ExampleSandbox_Python() {
	ctx := context.Background()
	c, _ := sdk.NewFromEnv()
	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Delete(context.WithoutCancel(ctx))
	res, err := sb.Python(ctx, "x = 21\nprint(x * 2)")
	switch {
	case sdk.IsCode(err, "session_not_ready"):
		log.Fatal("sandbox still starting: ", err)
	case err != nil:
		log.Fatal(err)
	case !res.Success:
		log.Fatal("python raised: ", res.Error)
	}
	fmt.Println(res.Output)
	// Output: 42
}

func ExampleSandbox_Python_raising() {
	ctx := context.Background()
	c, _ := sdk.NewFromEnv()
	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Delete(context.WithoutCancel(ctx))
	// Code that raises is a result, not an error: Success is false and Error holds the traceback.
	res, err := sb.Python(ctx, "1/0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Success, strings.Contains(res.Error, "ZeroDivisionError"))
	// Output: false true
}

func ExampleClient_Upload() {
	ctx := context.Background()
	c, _ := sdk.NewFromEnv()
	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Delete(context.WithoutCancel(ctx))
	data := []byte("id,value\n1,42\n")
	// Streams the body (an *os.File the same way); a seekable body is retried on 502/503/504.
	res, err := c.Upload(ctx, sb.ID, "data/dataset.csv", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Path, res.Size)
	// Output: data/dataset.csv 14
}

func ExampleClient_Download() {
	ctx := context.Background()
	c, _ := sdk.NewFromEnv()
	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Delete(context.WithoutCancel(ctx))
	if err := sb.WriteFile(ctx, "out/result.txt", "done\n"); err != nil {
		log.Fatal(err)
	}
	var out bytes.Buffer // an *os.File in a program
	n, err := c.Download(ctx, sb.ID, "out/result.txt", &out)
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Download(ctx, sb.ID, "out/missing.txt", &out)
	fmt.Println(n, "bytes:", strings.TrimSpace(out.String()), sdk.IsNotFound(err))
	// Output: 5 bytes: done true
}

func ExampleSandbox_History() {
	ctx := context.Background()
	c, _ := sdk.NewFromEnv()
	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Delete(context.WithoutCancel(ctx))
	if _, err := sb.ExecPython(ctx, sdk.PythonRequest{Code: "print(6 * 7)", ExecOptions: sdk.ExecOptions{Tags: "demo"}}); err != nil {
		log.Fatal(err)
	}
	h, err := sb.History(ctx, sdk.HistoryRequest{ExecType: "python"})
	if err != nil {
		log.Fatal(err)
	}
	// Result fields are plain: "" where bay sent null (no description), time.Time in UTC,
	// time.Duration for the wire's milliseconds.
	e := h.Entries[0]
	fmt.Println(h.Total, e.ExecType, e.Output, e.Tags, e.Description == "", e.CreatedAt.Location(), e.ExecutionTime >= 0)
	// Output: 1 python 42 demo true UTC true
}
