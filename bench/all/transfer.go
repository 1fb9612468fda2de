package main

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/bench/benchlib"
)

// payload is a deterministic, incompressible stream of size bytes: a random 1 MiB block
// repeated with its index stamped into the first 8 bytes, so every block differs. It costs
// the client almost nothing, so the figures measure the path, not the generator.
type payload struct {
	block []byte
	size  int64
	off   int64
}

func newPayload(block []byte, size int64) *payload { return &payload{block: block, size: size} }

func (p *payload) Read(buf []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	bs := int64(len(p.block))
	n := 0
	for n < len(buf) && p.off < p.size {
		idx, in := p.off/bs, p.off%bs
		if in == 0 {
			binary.LittleEndian.PutUint64(p.block, uint64(idx))
		}
		c := copy(buf[n:], p.block[in:min(bs, in+(p.size-p.off))])
		n += c
		p.off += int64(c)
	}
	return n, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum returns the CRC-32C of the payload (what a transfer must reproduce).
func checksum(block []byte, size int64) (uint32, error) {
	h := crc32.New(castagnoli)
	_, err := io.Copy(h, newPayload(block, size))
	return h.Sum32(), err
}

func (b *bench) figTransfer(ctx context.Context) error {
	size := b.reps.TransferMB << 20
	label := fmt.Sprintf("%d MiB", b.reps.TransferMB)
	if b.reps.TransferMB%1024 == 0 {
		label = fmt.Sprintf("%d GiB", b.reps.TransferMB/1024)
	}
	upID, upTitle := "upload", label+" upload through bay"
	downID, downTitle := "download", label+" download through bay"
	fail := func(err error) error {
		b.failed(upID, upTitle, err)
		return b.failed(downID, downTitle, err)
	}
	block := make([]byte, 1<<20)
	rand.Read(block)
	want, err := checksum(block, size)
	if err != nil {
		return fail(err)
	}

	id, _, ep, err := b.sharedReady(ctx)
	defer b.releaseShared(ctx)
	if err != nil {
		return fail(err)
	}
	rs, err := b.rawCreate(ctx)
	defer b.rawRemove(ctx, rs)
	if err != nil {
		return fail(err)
	}
	if err := b.shipWaitHealthy(ctx, rs.Endpoint); err != nil {
		return fail(err)
	}
	if err := b.shipPython(ctx, rs.Endpoint, "1+1", "2"); err != nil { // same state as the bay sandbox: kernel up
		return fail(err)
	}

	pid := b.bay.proc.PID()
	var upBay, downBay, upRaw, downRaw, upShip, downShip []float64
	var upGrowth, downGrowth float64
	for i := range b.reps.Transfer {
		path := fmt.Sprintf("bench-%d.bin", i)
		// bay upload, bay RSS sampled every 10 ms
		before := benchlib.RSS(pid)
		stop := benchlib.PeakRSS(pid, 10*time.Millisecond)
		d, err := benchlib.Time(func() error { return b.upload(ctx, id, path, newPayload(block, size), size) })
		peak := stop()
		if err != nil {
			return fail(fmt.Errorf("bay upload: %w", err))
		}
		upBay = append(upBay, benchlib.MBps(size, d))
		upGrowth = max(upGrowth, benchlib.MiB(peak-before))

		before = benchlib.RSS(pid)
		stop = benchlib.PeakRSS(pid, 10*time.Millisecond)
		h := crc32.New(castagnoli)
		var n int64
		d, err = benchlib.Time(func() error { var err error; n, err = b.download(ctx, id, path, h); return err })
		peak = stop()
		if err != nil {
			return fail(fmt.Errorf("bay download: %w", err))
		}
		if n != size || h.Sum32() != want {
			return fail(fmt.Errorf("bay download: got %d bytes crc %08x, want %d bytes crc %08x", n, h.Sum32(), size, want))
		}
		downBay = append(downBay, benchlib.MBps(size, d))
		downGrowth = max(downGrowth, benchlib.MiB(peak-before))
		if err := b.shell(ctx, id, "rm -f "+path); err != nil {
			return fail(err)
		}

		// ship directly on the same sandbox's container: what bay adds on top of ship
		d, err = benchlib.Time(func() error { return b.shipUpload(ctx, ep, path, newPayload(block, size), size) })
		if err != nil {
			return fail(err)
		}
		upShip = append(upShip, benchlib.MBps(size, d))
		h = crc32.New(castagnoli)
		d, err = benchlib.Time(func() error { var err error; n, err = b.shipDownload(ctx, ep, path, h); return err })
		if err != nil {
			return fail(err)
		}
		if n != size || h.Sum32() != want {
			return fail(fmt.Errorf("ship download: got %d bytes crc %08x, want %d bytes crc %08x", n, h.Sum32(), size, want))
		}
		downShip = append(downShip, benchlib.MBps(size, d))
		if err := b.shipShell(ctx, ep, "rm -f "+path); err != nil {
			return fail(err)
		}

		// raw: the Engine API's archive endpoints into and out of the same kind of volume
		d, err = benchlib.Time(func() error { return b.rawCopyTo(ctx, rs.ID, "/workspace", path, newPayload(block, size), size) })
		if err != nil {
			return fail(err)
		}
		upRaw = append(upRaw, benchlib.MBps(size, d))
		h = crc32.New(castagnoli)
		d, err = benchlib.Time(func() error { var err error; n, err = b.rawCopyFrom(ctx, rs.ID, "/workspace/"+path, h); return err })
		if err != nil {
			return fail(err)
		}
		if n != size || h.Sum32() != want {
			return fail(fmt.Errorf("raw copy from container: got %d bytes crc %08x, want %d bytes crc %08x", n, h.Sum32(), size, want))
		}
		downRaw = append(downRaw, benchlib.MBps(size, d))
		if _, err := b.engineExec(ctx, rs.ID, "rm", "-f", "/workspace/"+path); err != nil {
			return fail(err)
		}
	}
	mk := func(id, title string, bay, raw, ship []float64, growth float64, what, shipWhat string) {
		s := benchlib.SummarizeValues(bay, "MB/s")
		r := benchlib.SummarizeValues(raw, "MB/s")
		sh := benchlib.SummarizeValues(ship, "MB/s")
		f := &benchlib.Figure{ID: id, Title: title, Measured: benchlib.Series{Name: "bay", Stats: &s, Unit: "MB/s"}}
		f.AddBaseline(benchlib.Series{Name: what, Stats: &r, Unit: "MB/s"})
		f.AddBaseline(benchlib.Series{Name: shipWhat, Stats: &sh, Unit: "MB/s"})
		f.AtLeast("p50", s.P50, 200, "MB/s")
		f.AtMost("bay RSS growth", growth, 32, "MiB")
		f.Breakdown = []benchlib.Series{benchlib.Scalar("bay peak RSS growth during the transfer", growth, "MiB")}
		f.Note("MB = 10^6 bytes; ratio = bay throughput / raw throughput (higher is better); %d transfer(s) per side of %d MiB, content checked with CRC-32C", b.reps.Transfer, b.reps.TransferMB)
		f.Note("bay RSS: VmRSS of the bay process sampled every 10 ms during the transfer, minus VmRSS just before")
		b.add(f)
	}
	mk(upID, upTitle, upBay, upRaw, upShip, upGrowth, "raw Engine API CopyToContainer (tar) into a volume", "ship /fs/upload direct, same sandbox")
	mk(downID, downTitle, downBay, downRaw, downShip, downGrowth, "raw Engine API CopyFromContainer (tar) from a volume", "ship /fs/download direct, same sandbox")
	return nil
}

// rawCopyTo streams a one-file tar of src into dir of the container (the engine extracts it
// as root: copyUIDGID would need a passwd entry for 1000 in the image).
func (b *bench) rawCopyTo(ctx context.Context, id, dir, name string, src io.Reader, size int64) error {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Uid: 1000, Gid: 1000, ModTime: time.Now(), Typeflag: tar.TypeReg})
		if err == nil {
			_, err = io.Copy(tw, src)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	_, err := b.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: dir, Content: pr})
	pr.CloseWithError(errors.New("copy ended"))
	if err != nil {
		return fmt.Errorf("raw copy to container: %w", err)
	}
	return nil
}

// rawCopyFrom streams one file out of the container into dst.
func (b *bench) rawCopyFrom(ctx context.Context, id, path string, dst io.Writer) (int64, error) {
	res, err := b.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		return 0, fmt.Errorf("raw copy from container: %w", err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	if _, err := tr.Next(); err != nil {
		return 0, fmt.Errorf("raw copy from container: tar: %w", err)
	}
	return io.Copy(dst, tr)
}
