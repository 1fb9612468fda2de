package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/sdk"
)

// skillInvokeCmd is `shipyard skills invoke <id>`.
func (a *app) skillInvokeCmd() *cobra.Command {
	var (
		project, inputsFile, policy, taskID, cid string
		inputs                                   []string
		noWait                                   bool
	)
	cmd := &cobra.Command{Use: "invoke <id>", Short: "Invoke an invocable skill as an audited exec and print its outputs",
		Long: `Invoke an invocable skill: its inputs are checked against the manifest's interface.inputs
(each violation is printed with its JSON pointer), written to /workspace/inputs/inputs.json, and
the manifest's entrypoint runs in a fresh container without network. The outputs (the object
the skill wrote to artifacts/outputs.json, else its exit_code, stdout and stderr as the
interface declares them) are printed as JSON; how they fail interface.outputs goes to stderr.

--inputs-file reads a JSON object; --input KEY=VALUE sets one key on top of it, VALUE taken as
JSON when it parses as JSON (2, true, [1], {"a":1}, "quoted") and as a string otherwise. The
exit code is the exec's; 124 when it timed out.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := invokeInputs(a.stdin, inputsFile, inputs)
			if err != nil {
				return err
			}
			raw, err := json.Marshal(in)
			if err != nil {
				return usageErr("inputs: %v", err)
			}
			req := sdk.InvokeRequest{ProjectID: project, Inputs: raw, TaskID: taskID, ConversationID: cid, NoWait: noWait}
			if req.PolicyOverrides, err = policyOverrides(policy); err != nil {
				return err
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				res, err := c.InvokeSkill(ctx, args[0], req)
				if err != nil {
					a.printProblems(err)
					return err
				}
				if a.json() || noWait {
					if err := a.printJSON(res); err != nil {
						return err
					}
				} else {
					if res.Outputs != nil {
						if err := a.printJSON(res.Outputs); err != nil {
							return err
						}
					}
					for _, v := range res.OutputsErrors {
						fmt.Fprintf(a.stderr, "outputs %s: %s\n", v.Pointer, v.Message)
					}
					fmt.Fprintf(a.stderr, "[%s %s%s]\n", res.Exec.ExecID, res.Exec.Status, reasonSuffix(&res.Exec))
				}
				return execExit(&res.Exec)
			})
		}}
	cmd.Flags().StringVar(&project, "project", "cli", "project (workspace) of the invocation")
	cmd.Flags().StringArrayVar(&inputs, "input", nil, "KEY=VALUE: one input (VALUE as JSON when it parses, else a string; repeatable)")
	cmd.Flags().StringVar(&inputsFile, "inputs-file", "", "a JSON object of inputs ('-' reads stdin)")
	cmd.Flags().StringVar(&policy, "policy", "", "policy overrides as a JSON object (tighten only)")
	cmd.Flags().StringVar(&taskID, "task", "", "task id recorded with the exec")
	cmd.Flags().StringVar(&cid, "conversation", "", "conversation id recorded with the exec")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "return at once with the queued invocation")
	return cmd
}

// maxInputsFile bounds --inputs-file.
const maxInputsFile = 64 << 20

// invokeInputs merges --inputs-file and the --input pairs into one object.
func invokeInputs(stdin io.Reader, file string, pairs []string) (map[string]any, error) {
	in := map[string]any{}
	if file != "" {
		var data []byte
		var err error
		if file == "-" {
			data, err = readAllLimited(stdin, maxInputsFile)
		} else {
			data, err = readFileLimited(file, maxInputsFile)
		}
		if err != nil {
			return nil, usageErr("--inputs-file: %v", err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&in); err != nil || in == nil {
			return nil, usageErr("--inputs-file %s: not a JSON object", file)
		}
	}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageErr("--input %q: want KEY=VALUE", p)
		}
		var val any = v
		dec := json.NewDecoder(strings.NewReader(v))
		dec.UseNumber()
		var parsed any
		if err := dec.Decode(&parsed); err == nil && !dec.More() && json.Valid([]byte(v)) {
			val = parsed
		}
		in[k] = val
	}
	return in, nil
}

func readAllLimited(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = fmt.Errorf("more than %d bytes", limit)
	}
	return data, err
}

func readFileLimited(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAllLimited(f, limit)
}

// policyOverrides is the --policy flag an exec and an invocation share: a JSON object, or
// nil when the flag is empty.
func policyOverrides(policy string) (json.RawMessage, error) {
	if policy == "" {
		return nil, nil
	}
	if !json.Valid([]byte(policy)) {
		return nil, usageErr("--policy is not JSON: %s", policy)
	}
	return json.RawMessage(policy), nil
}
