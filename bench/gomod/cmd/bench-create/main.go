// Command bench-create POSTs a list of objects to the API server as fast as it accepts them,
// from a number of parallel workers, with no client-side rate limit. The benchmark uses it to
// submit jobs "at once" and, on pods, as the API server's own ceiling on this machine.
//
// Input (stdin or -input): one JSON object a line, {"path": "/api/v1/namespaces/ns/pods",
// "body": {...}}. Output (stdout): one JSON object a line per request, in completion order,
// {"i": line index, "name": ..., "start": unix seconds, "end": unix seconds, "code": HTTP
// status}. A summary goes to stderr; the exit code is 1 when any request failed.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

type item struct {
	Path string          `json:"path"`
	Body json.RawMessage `json:"body"`
}

type result struct {
	I     int     `json:"i"`
	Name  string  `json:"name"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Code  int     `json:"code"`
	Error string  `json:"error,omitempty"`
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "path of a kubeconfig file")
	workers := flag.Int("workers", 32, "requests in flight at once")
	input := flag.String("input", "-", "file of JSON lines {path, body}; - for stdin")
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(2)
	}
	// A transport of client-go (TLS, client certificates, HTTP/2 as client-go speaks it),
	// without the rate limiter that a RESTClient would add.
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "transport:", err)
		os.Exit(2)
	}
	client := &http.Client{Transport: transport, Timeout: 60 * time.Second}

	var in io.Reader = os.Stdin
	if *input != "-" {
		f, err := os.Open(*input)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	}
	var items []item
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	for scanner.Scan() {
		line := bytes.TrimSpace(scanner.Bytes())
		if len(line) == 0 {
			continue
		}
		var it item
		if err := json.Unmarshal(line, &it); err != nil {
			fmt.Fprintln(os.Stderr, "input:", err)
			os.Exit(2)
		}
		items = append(items, it)
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "input:", err)
		os.Exit(2)
	}

	jobs := make(chan int)
	results := make(chan result, len(items))
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				results <- post(client, cfg.Host, i, items[i])
			}
		}()
	}
	began := time.Now()
	go func() {
		for i := range items {
			jobs <- i
		}
		close(jobs)
	}()
	go func() { wg.Wait(); close(results) }()

	out := bufio.NewWriter(os.Stdout)
	failed := 0
	for r := range results {
		if r.Code < 200 || r.Code >= 300 {
			failed++
		}
		line, _ := json.Marshal(r)
		out.Write(append(line, '\n'))
	}
	out.Flush()
	elapsed := time.Since(began).Seconds()
	fmt.Fprintf(os.Stderr, "bench-create: %d request(s), %d failed, %.2fs, %.1f/s\n",
		len(items), failed, elapsed, float64(len(items))/elapsed)
	if failed > 0 {
		os.Exit(1)
	}
}

func post(client *http.Client, host string, i int, it item) result {
	var meta struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(it.Body, &meta)
	r := result{I: i, Name: meta.Metadata.Name}
	start := time.Now()
	req, err := http.NewRequest(http.MethodPost, host+it.Path, bytes.NewReader(it.Body))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		var resp *http.Response
		resp, err = client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			r.Code = resp.StatusCode
			if resp.StatusCode >= 300 {
				r.Error = string(body[:min(len(body), 300)])
			}
		}
	}
	if err != nil {
		r.Error = err.Error()
	}
	r.Start, r.End = unix(start), unix(time.Now())
	return r
}
