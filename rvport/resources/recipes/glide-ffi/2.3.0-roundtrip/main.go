// Command glide-roundtrip proves that a riscv64 libglide_ffi.a works, not only that it links: it drives a
// real valkey-server through GLIDE's Go client and checks every answer. Written for rvport's glide-ffi smoke
// test; exit status 0 only when every check passed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	glide "github.com/valkey-io/valkey-glide/go/v2"
	"github.com/valkey-io/valkey-glide/go/v2/config"
	"github.com/valkey-io/valkey-glide/go/v2/pipeline"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "glide-roundtrip: FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func connect(host string, port int) (*glide.Client, error) {
	cfg := config.NewClientConfiguration().
		WithAddress(&config.NodeAddress{Host: host, Port: port}).
		WithRequestTimeout(10 * time.Second)
	return glide.NewClient(cfg)
}

func main() {
	host := flag.String("host", "127.0.0.1", "valkey-server address")
	port := flag.Int("port", 6379, "valkey-server port")
	deadPort := flag.Int("dead-port", 6390, "a port nothing listens on (the client must report a connection error)")
	flag.Parse()
	ctx := context.Background()

	client, err := connect(*host, *port)
	if err != nil {
		fail("connect to %s:%d: %v", *host, *port, err)
	}
	defer client.Close()

	if got, err := client.Set(ctx, "rvport:greeting", "hello riscv64"); err != nil || got != "OK" {
		fail("SET: got %q, %v", got, err)
	}
	fmt.Println("SET rvport:greeting: OK")
	value, err := client.Get(ctx, "rvport:greeting")
	if err != nil || value.IsNil() || value.Value() != "hello riscv64" {
		fail("GET: got %q (nil: %v), %v", value.Value(), value.IsNil(), err)
	}
	fmt.Printf("GET rvport:greeting: %q\n", value.Value())
	if _, err := client.Set(ctx, "rvport:counter", "41"); err != nil {
		fail("SET counter: %v", err)
	}
	if n, err := client.Incr(ctx, "rvport:counter"); err != nil || n != 42 {
		fail("INCR: got %d, %v", n, err)
	}
	fmt.Println("INCR rvport:counter: 42")

	batch := pipeline.NewStandaloneBatch(false)
	batch.Set("rvport:batch", "b1").Get("rvport:batch").Incr("rvport:counter")
	results, err := client.Exec(ctx, *batch, true)
	if err != nil {
		fail("batch: %v", err)
	}
	if got := fmt.Sprint(results); got != "[OK b1 43]" {
		fail("batch: got %s, want [OK b1 43]", got)
	}
	fmt.Printf("batch SET GET INCR: %v\n", results)

	_, err = connect(*host, *deadPort)
	var connErr *glide.ConnectionError
	if err == nil || !errors.As(err, &connErr) {
		fail("wrong port %d: want the client's ConnectionError, got %T: %v", *deadPort, err, err)
	}
	fmt.Printf("wrong port %d: ConnectionError: %v\n", *deadPort, err)
	fmt.Println("glide round trip ok")
}
