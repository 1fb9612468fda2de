// Command server is the only process of the drivertest image (internal/bay/drivertest/testimage):
// a tiny static HTTP server standing in for ship, so that the driver conformance suite can check
// that a started container is reachable and runs with the settings the driver asked for.
//
//	GET  /health          200 {"status":"healthy"}
//	GET  /whoami          200 {"uid":..,"gid":..,"hostname":..,"env":[..]}
//	GET  /resolve?name=N  200 {"addrs":[..]} (Go's resolver), 502 with the error
//	PUT  /file?path=P     write the body to P (absolute path in the container)
//	GET  /file?path=P     read P
//	POST /exit?code=N     reply, then exit with code N (default 0)
//	GET  /fetch?url=U     GET U from inside the container; 200 with its status code, 502 when
//	                      it cannot be reached (2 s)
//	POST /userns          start a child in new user and PID namespaces (what Chromium's sandbox
//	                      does); 204 when it ran, 403 with the error when it could not start
//
// It listens on :$PORT, default :8123.
//
// Run as "/server oneshot OUT ERR CODE [SLEEP_MS]" it is a one-shot instead: it prints "uid=U
// ifaces=I1,I2" and OUT on stdout, ERR on stderr, sleeps SLEEP_MS, and exits with CODE.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func oneShot(args []string) {
	if len(args) != 3 && len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: server oneshot OUT ERR CODE [SLEEP_MS]")
		os.Exit(2)
	}
	var names []string
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	fmt.Printf("uid=%d ifaces=%s\n%s", os.Getuid(), strings.Join(names, ","), args[0])
	fmt.Fprint(os.Stderr, args[1])
	if len(args) == 4 {
		ms, _ := strconv.Atoi(args[3])
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	code, _ := strconv.Atoi(args[2])
	os.Exit(code)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		os.Exit(0) // the /userns child: it started, that is all
	}
	if len(os.Args) > 1 && os.Args[1] == "oneshot" {
		oneShot(os.Args[2:])
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8123"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"status": "healthy"})
	})
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) {
		host, _ := os.Hostname()
		writeJSON(w, map[string]any{"uid": os.Getuid(), "gid": os.Getgid(), "hostname": host, "env": os.Environ()})
	})
	mux.HandleFunc("PUT /file", func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(r.Body)
		if err == nil {
			err = os.WriteFile(r.URL.Query().Get("path"), data, 0o644)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /file", func(w http.ResponseWriter, r *http.Request) {
		data, err := os.ReadFile(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		_, _ = w.Write(data)
	})
	mux.HandleFunc("GET /stat", func(w http.ResponseWriter, r *http.Request) {
		fi, err := os.Stat(r.URL.Query().Get("path")) // through symbolic links
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		writeJSON(w, map[string]any{"mode": fi.Mode().Perm(), "size": fi.Size(), "dir": fi.IsDir()})
	})
	mux.HandleFunc("GET /fetch", func(w http.ResponseWriter, r *http.Request) {
		c := &http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get(r.URL.Query().Get("url"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		writeJSON(w, map[string]any{"status": resp.StatusCode})
	})
	mux.HandleFunc("GET /resolve", func(w http.ResponseWriter, r *http.Request) {
		// Go's own resolver: /etc/hosts, then the servers of /etc/resolv.conf.
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, r.URL.Query().Get("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		writeJSON(w, map[string]any{"addrs": addrs})
	})
	mux.HandleFunc("POST /exit", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.WriteHeader(http.StatusAccepted)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		go func() {
			time.Sleep(50 * time.Millisecond) // let the reply leave
			os.Exit(code)
		}()
	})
	mux.HandleFunc("POST /userns", func(w http.ResponseWriter, r *http.Request) {
		self, err := os.Executable()
		if err == nil {
			cmd := exec.Command(self, "-child")
			cmd.SysProcAttr = &syscall.SysProcAttr{
				Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID,
				UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
				GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
			}
			err = cmd.Run()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Addr: ":" + port, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
