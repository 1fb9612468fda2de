package sdk_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/shipyard-dev/shipyard/sdk"
)

func ExampleClient_CreateSandbox() {
	ctx := context.Background()
	c, err := sdk.NewFromEnv() // SHIPYARD_ENDPOINT / SHIPYARD_TOKEN
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxRequest{Profile: "python-default", TTL: 3600})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Delete(context.WithoutCancel(ctx))
	fmt.Println(sb.ID, sb.Status)
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
		log.Fatal("python raised: ", *res.Error)
	}
	fmt.Println(res.Output)
}

func ExampleClient_Upload() {
	ctx := context.Background()
	c, _ := sdk.NewFromEnv()
	f, err := os.Open("dataset.csv")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	// Streams the file (no buffering); retried on 502/503/504 because *os.File can be rewound.
	res, err := c.Upload(ctx, "sandbox-3f2a9c1b7d4e", "data/dataset.csv", f, st.Size())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Path, res.Size)
}

func ExampleClient_Download() {
	ctx := context.Background()
	c, _ := sdk.NewFromEnv()
	out, err := os.Create("result.parquet")
	if err != nil {
		log.Fatal(err)
	}
	defer out.Close()
	n, err := c.Download(ctx, "sandbox-3f2a9c1b7d4e", "out/result.parquet", out)
	if sdk.IsNotFound(err) {
		log.Fatal("no such file in the workspace")
	} else if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "bytes")
}
