package benchlib

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// RSS is a process's resident set size (VmRSS) in bytes; 0 when the process is gone.
func RSS(pid int) int64 { return kbField("/proc/"+strconv.Itoa(pid)+"/status", "VmRSS") }

// RSSAnon and RSSFile split a process's resident set (RssAnon, RssFile) in bytes: its
// private memory (heap, stacks) and the pages of mapped files (its binary), which are clean
// and shared with the page cache.
func RSSAnon(pid int) int64 { return kbField("/proc/"+strconv.Itoa(pid)+"/status", "RssAnon") }

func RSSFile(pid int) int64 { return kbField("/proc/"+strconv.Itoa(pid)+"/status", "RssFile") }

// HWM is a process's peak resident set size (VmHWM) in bytes since it started.
func HWM(pid int) int64 { return kbField("/proc/"+strconv.Itoa(pid)+"/status", "VmHWM") }

// PeakRSS samples a process's VmRSS every interval until stop is called, which returns the
// highest value seen (a sample is also taken at start and at stop). VmHWM cannot be reset
// without privileges, so a peak during one phase is sampled.
func PeakRSS(pid int, interval time.Duration) (stop func() int64) {
	var peak atomic.Int64
	sample := func() {
		if v := RSS(pid); v > peak.Load() {
			peak.Store(v)
		}
	}
	sample()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		sample()
		return peak.Load()
	}
}
