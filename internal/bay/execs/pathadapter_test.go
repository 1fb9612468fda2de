package execs

import "testing"

func TestDetectRuntime(t *testing.T) {
	cases := []struct {
		mode       Runtime
		goos, proc string
		want       Runtime
	}{
		{RuntimeAuto, "linux", "Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org)", RuntimeLinux},
		{RuntimeAuto, "linux", "Linux version 5.15.153.1-microsoft-standard-WSL2", RuntimeWSL},
		{"", "windows", "", RuntimeWindows},
		{RuntimeLinux, "linux", "5.15.153.1-microsoft-standard-WSL2", RuntimeLinux},
		{RuntimeWSL, "linux", "", RuntimeWSL},
	}
	for _, c := range cases {
		if got := DetectRuntime(c.mode, c.goos, c.proc); got != c.want {
			t.Errorf("DetectRuntime(%q, %q, %q) = %q, want %q", c.mode, c.goos, c.proc, got, c.want)
		}
	}
}

func TestAdaptPaths(t *testing.T) {
	cases := []struct {
		name            string
		rt              Runtime
		linux, win, wsl string
		native, mount   string
		wantErr         bool
	}{
		{"linux", RuntimeLinux, "/var/lib/bay/ws/", "", "", "/var/lib/bay/ws", "/var/lib/bay/ws", false},
		{"linux relative", RuntimeLinux, "ws", "", "", "", "", true},
		{"linux empty", RuntimeLinux, "", `D:\ws`, "/mnt/d/ws", "", "", true},
		{"windows from win", RuntimeWindows, "", `d:\Shipyard\ws\`, "", `D:\Shipyard\ws`, `D:\Shipyard\ws`, false},
		{"windows forward slashes", RuntimeWindows, "", `D:/Shipyard/ws`, "", `D:\Shipyard\ws`, `D:\Shipyard\ws`, false},
		{"windows from wsl", RuntimeWindows, "", "", "/mnt/d/shipyard/ws", `D:\shipyard\ws`, `D:\shipyard\ws`, false},
		{"windows never takes /mnt as win root", RuntimeWindows, "", "/mnt/d/ws", "", "", "", true},
		{"windows wsl root not on a drive", RuntimeWindows, "", "", "/home/me/ws", "", "", true},
		{"windows nothing set", RuntimeWindows, "", "", "", "", "", true},
		{"windows dotdot stays on the drive", RuntimeWindows, "", `D:\a\..\..\ws`, "", `D:\ws`, `D:\ws`, false},
		{"wsl from wsl", RuntimeWSL, "", `D:\ignored`, "/mnt/d/shipyard/ws/", "/mnt/d/shipyard/ws", "/mnt/d/shipyard/ws", false},
		{"wsl home dir", RuntimeWSL, "", "", "/home/me/ws", "/home/me/ws", "/home/me/ws", false},
		{"wsl from win", RuntimeWSL, "", `E:\Data\WS`, "", "/mnt/e/Data/WS", "/mnt/e/Data/WS", false},
		{"wsl never takes a drive path", RuntimeWSL, "", "", `D:\ws`, "", "", true},
		{"wsl win root malformed", RuntimeWSL, "", `\\server\share`, "", "", "", true},
		{"unknown runtime", "mac", "/x", "", "", "", "", true},
	}
	for _, c := range cases {
		got, err := AdaptPaths(c.rt, c.linux, c.win, c.wsl)
		if c.wantErr {
			if err == nil {
				t.Errorf("%s: got %+v, want an error", c.name, got)
			}
			continue
		}
		if err != nil || got.Native != c.native || got.Mount != c.mount {
			t.Errorf("%s: got %+v, %v; want native %q mount %q", c.name, got, err, c.native, c.mount)
		}
	}
}
