package deps
import (
 _ "github.com/moby/moby/client"
 _ "github.com/moby/moby/api/types/container"
 _ "github.com/go-zeromq/zmq4"
 _ "github.com/creack/pty"
 _ "github.com/coder/websocket"
 _ "modernc.org/sqlite"
 _ "github.com/modelcontextprotocol/go-sdk/mcp"
 _ "github.com/spf13/cobra"
 _ "go.yaml.in/yaml/v3"
 _ "golang.org/x/term"
)
