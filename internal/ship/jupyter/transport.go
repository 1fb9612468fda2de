package jupyter

import (
	"context"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/go-zeromq/zmq4"
)

// SocketKind is the ZeroMQ socket type the client needs for a channel.
type SocketKind int

const (
	Dealer SocketKind = iota // shell, control
	Sub                      // iopub, subscribed to everything
	Req                      // heartbeat
)

// Socket is the part of a ZeroMQ socket the client uses. Recv must return an
// error once Close has been called.
type Socket interface {
	Send(frames [][]byte) error
	Recv() ([][]byte, error)
	Close() error
}

// Transport dials sockets. ZMQ4 is the implementation; a cgo libzmq binding
// could replace it without touching the protocol code.
type Transport interface {
	Dial(ctx context.Context, kind SocketKind, endpoint string) (Socket, error)
}

// ZMQ4 is the pure-Go ZeroMQ transport (github.com/go-zeromq/zmq4).
type ZMQ4 struct{}

var _ Transport = ZMQ4{}

// Dial connects a socket, retrying while the kernel is still binding its ports.
// ctx bounds only the dial: the socket lives until Close.
func (ZMQ4) Dial(ctx context.Context, kind SocketKind, endpoint string) (Socket, error) {
	opts := []zmq4.Option{
		zmq4.WithLogger(log.New(io.Discard, "", 0)),
		zmq4.WithDialerRetry(25 * time.Millisecond),
		zmq4.WithDialerMaxRetries(-1), // bounded by ctx below
		zmq4.WithDialerTimeout(2 * time.Second),
	}
	// zmq4 ties a socket's whole life to the context it is created with.
	life := context.Background()
	var s zmq4.Socket
	switch kind {
	case Dealer:
		s = zmq4.NewDealer(life, opts...)
	case Sub:
		s = zmq4.NewSub(life, opts...)
	case Req:
		s = zmq4.NewReq(life, opts...)
	default:
		return nil, fmt.Errorf("zmq4: unknown socket kind %d", kind)
	}
	done := make(chan error, 1)
	go func() { done <- s.Dial(endpoint) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		s.Close() // ends the dial's retry loop
		<-done
		err = ctx.Err()
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	if kind == Sub {
		if err := s.SetOption(zmq4.OptionSubscribe, ""); err != nil {
			s.Close()
			return nil, fmt.Errorf("subscribe %s: %w", endpoint, err)
		}
	}
	return zsock{s}, nil
}

type zsock struct{ s zmq4.Socket }

func (z zsock) Send(frames [][]byte) error {
	if len(frames) == 1 {
		return z.s.Send(zmq4.NewMsg(frames[0]))
	}
	return z.s.SendMulti(zmq4.NewMsgFrom(frames...))
}

func (z zsock) Recv() ([][]byte, error) {
	m, err := z.s.Recv()
	if err != nil {
		return nil, err
	}
	return m.Frames, nil
}

func (z zsock) Close() error { return z.s.Close() }
