package ship

import (
	"runtime"
	"sync"
)

// reservedThreads is how many OS threads ship creates at start and keeps.
const reservedThreads = 16

// reserveThreads makes the Go runtime create n OS threads now and keep them.
//
// Ship shares the sandbox's pids limit with user code, and threads count
// against it. When a fork bomb holds every slot, a runtime that needs one
// more thread (a goroutine blocked in a syscall while others must run) fails
// to create it and aborts the whole process, taking the sandbox with it,
// before ship could kill the bomb. The runtime never gives idle threads back,
// so threads made here, while slots are free, are the ones it later reuses:
// n goroutines each hold a thread of their own until all exist, then return.
func reserveThreads(n int) {
	var started sync.WaitGroup
	release := make(chan struct{})
	started.Add(n)
	for range n {
		go func() {
			runtime.LockOSThread()
			started.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	started.Wait()
	close(release)
}
