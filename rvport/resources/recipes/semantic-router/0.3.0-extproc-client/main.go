// Command rvport-extproc-client asks a running vLLM Semantic Router for routing decisions over its Envoy
// ExtProc gRPC API, the way Envoy does for an OpenAI-style POST /v1/chat/completions, and checks the model
// the router picked. Written for rvport's semantic-router recipe (issue #15); it is built inside the
// router's module so it uses the router's own vendored go-control-plane and gRPC.
//
// One decision is one ExternalProcessor.Process stream: the request headers (end_of_stream false), then the
// whole body in one message (end_of_stream true), as Envoy sends them with request_body_mode BUFFERED. The
// router answers the headers with CONTINUE and the body with CONTINUE plus a header mutation that sets
// x-selected-model and a body mutation whose "model" is the chosen one. With -stream the body asks for
// "stream": true and the accept header is text/event-stream; the rewritten body must keep "stream": true.
//
// Exit status: 0 when every decision chose -want, 1 when one chose another model, 2 for bad usage, 3 for
// an error or a timeout (the health check included).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extproc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

const selectedModelHeader = "x-selected-model" // set by the router on the request body's answer

var errWrongModel = errors.New("wrong model")

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model    string    `json:"model"`
	Messages []message `json:"messages"`
	Stream   bool      `json:"stream,omitempty"`
}

// decision is what the router answered to one request body.
type decision struct {
	header  string         // x-selected-model from the header mutation, "" when absent
	body    map[string]any // the rewritten body, nil when the router left the body alone
	rawBody []byte         // the same, as the router sent it
}

func header(name, value string) *core.HeaderValue {
	return &core.HeaderValue{Key: name, RawValue: []byte(value)} // Envoy sends raw values
}

// decide runs one request through the router: headers, then the buffered body.
func decide(ctx context.Context, client extproc.ExternalProcessorClient, body []byte, stream bool, id string) (decision, error) {
	s, err := client.Process(ctx)
	if err != nil {
		return decision{}, fmt.Errorf("open the ExtProc stream: %w", err)
	}
	defer s.CloseSend()

	accept := "application/json"
	if stream {
		accept = "text/event-stream"
	}
	headers := &extproc.HttpHeaders{Headers: &core.HeaderMap{Headers: []*core.HeaderValue{
		header(":method", "POST"), header(":path", "/v1/chat/completions"), header(":scheme", "http"),
		header(":authority", "router"), header("content-type", "application/json"), header("accept", accept),
		header("x-request-id", id), header("content-length", fmt.Sprint(len(body))),
	}}}
	if err := s.Send(&extproc.ProcessingRequest{Request: &extproc.ProcessingRequest_RequestHeaders{RequestHeaders: headers}}); err != nil {
		return decision{}, fmt.Errorf("send the request headers: %w", err)
	}
	resp, err := s.Recv()
	if err != nil {
		return decision{}, fmt.Errorf("the answer to the request headers: %w", err)
	}
	if err := continued(resp, resp.GetRequestHeaders()); err != nil {
		return decision{}, fmt.Errorf("the answer to the request headers: %w", err)
	}

	if err := s.Send(&extproc.ProcessingRequest{Request: &extproc.ProcessingRequest_RequestBody{
		RequestBody: &extproc.HttpBody{Body: body, EndOfStream: true}}}); err != nil {
		return decision{}, fmt.Errorf("send the request body: %w", err)
	}
	if resp, err = s.Recv(); err != nil {
		return decision{}, fmt.Errorf("the answer to the request body: %w", err)
	}
	if err := continued(resp, resp.GetRequestBody()); err != nil {
		return decision{}, fmt.Errorf("the answer to the request body: %w", err)
	}
	answer := resp.GetRequestBody().GetResponse()
	var d decision
	for _, h := range answer.GetHeaderMutation().GetSetHeaders() {
		if strings.EqualFold(h.GetHeader().GetKey(), selectedModelHeader) {
			d.header = h.GetHeader().GetValue()
			if d.header == "" {
				d.header = string(h.GetHeader().GetRawValue())
			}
		}
	}
	if raw := answer.GetBodyMutation().GetBody(); len(raw) > 0 {
		d.rawBody = raw
		if err := json.Unmarshal(raw, &d.body); err != nil {
			return decision{}, fmt.Errorf("the rewritten body is not JSON (%v): %.200s", err, raw)
		}
	}
	return d, nil
}

// continued checks that the router let the request go on: the expected answer, status CONTINUE.
func continued(resp *extproc.ProcessingResponse, answer interface {
	GetResponse() *extproc.CommonResponse
}) error {
	if ir := resp.GetImmediateResponse(); ir != nil {
		return fmt.Errorf("the router answered the client itself: HTTP %d, %.300s", ir.GetStatus().GetCode(), ir.GetBody())
	}
	if answer == nil || answer.GetResponse() == nil {
		return fmt.Errorf("unexpected answer %T", resp.GetResponse())
	}
	if st := answer.GetResponse().GetStatus(); st != extproc.CommonResponse_CONTINUE {
		return fmt.Errorf("status %v, not CONTINUE", st)
	}
	return nil
}

// check says what is wrong with a decision, or nil.
func check(d decision, want string, stream bool) error {
	if d.header != want {
		return fmt.Errorf("%w: %s is %q, want %q", errWrongModel, selectedModelHeader, d.header, want)
	}
	if d.body == nil {
		return fmt.Errorf("%w: the router did not rewrite the body", errWrongModel)
	}
	if d.body["model"] != want {
		return fmt.Errorf("%w: the rewritten body's model is %v, want %q", errWrongModel, d.body["model"], want)
	}
	if stream && d.body["stream"] != true {
		return fmt.Errorf("the rewritten body lost \"stream\": true: %.300s", d.rawBody)
	}
	return nil
}

// waitReady connects before any decision is timed.
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	conn.Connect()
	for {
		state := conn.GetState()
		if state == connectivity.Ready {
			return nil
		}
		if !conn.WaitForStateChange(ctx, state) {
			return fmt.Errorf("no gRPC connection (last state %v): %w", state, ctx.Err())
		}
	}
}

func health(url string, timeout time.Duration) error {
	c := http.Client{Timeout: timeout}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	fmt.Printf("GET %s: HTTP 200 %s\n", url, strings.TrimSpace(string(body)))
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(times []time.Duration) time.Duration {
	s := slices.Clone(times)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "rvport-extproc-client: "+format+"\n", args...)
	os.Exit(code)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "the router's ExtProc gRPC address")
	prompt := flag.String("prompt", "", "the user message; empty: only the -health check")
	model := flag.String("model", "auto", "the model the request names (the router chooses for \"auto\")")
	want := flag.String("want", "", "the model the router must choose")
	stream := flag.Bool("stream", false, "ask for a streamed answer (\"stream\": true, accept: text/event-stream)")
	healthURL := flag.String("health", "", "first GET this URL (the router's API server, e.g. http://HOST:8080/health); it must answer 200")
	n := flag.Int("n", 1, "how many times to ask")
	timeout := flag.Duration("timeout", time.Minute, "the limit for connecting, and for each decision and the health check")
	flag.Parse()
	if flag.NArg() > 0 || *n < 1 || (*prompt == "" && *healthURL == "") || (*prompt != "" && *want == "") {
		fmt.Fprintln(os.Stderr, "usage: rvport-extproc-client [-health URL] [-addr HOST:PORT -prompt TEXT -want MODEL [-stream] [-n N]]")
		flag.PrintDefaults()
		os.Exit(2)
	}
	if *healthURL != "" {
		if err := health(*healthURL, *timeout); err != nil {
			fail(3, "health: %v", err)
		}
	}
	if *prompt == "" {
		return
	}

	body, err := json.Marshal(chatRequest{Model: *model, Messages: []message{{Role: "user", Content: *prompt}}, Stream: *stream})
	if err != nil {
		fail(3, "%v", err)
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(3, "%s: %v", *addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	err = waitReady(ctx, conn)
	cancel()
	if err != nil {
		fail(3, "%s: %v", *addr, err)
	}

	client := extproc.NewExternalProcessorClient(conn)
	mode := "buffered"
	if *stream {
		mode = "stream"
	}
	times := make([]time.Duration, 0, *n)
	for i := 1; i <= *n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		start := time.Now()
		d, err := decide(ctx, client, body, *stream, fmt.Sprintf("rvport-%d-%d", os.Getpid(), i))
		took := time.Since(start)
		cancel()
		if err != nil {
			fail(3, "%q (%s) #%d: %v", *prompt, mode, i, err)
		}
		if err := check(d, *want, *stream); err != nil {
			code := 3
			if errors.Is(err, errWrongModel) {
				code = 1
			}
			fail(code, "%q (%s) #%d: %v", *prompt, mode, i, err)
		}
		times = append(times, took)
		fmt.Printf("%q (%s) #%d: %s %s, %.2f ms\n", *prompt, mode, i, selectedModelHeader, d.header, ms(took))
	}
	fmt.Printf("%q (%s): %s in %d of %d, min %.2f ms, median %.2f ms\n", *prompt, mode, *want, *n, *n,
		ms(slices.Min(times)), ms(median(times)))
}
