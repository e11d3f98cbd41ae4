package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// This file is ordinary net/http client code: it takes an *http.Client
// and knows nothing about SQS.

const base = "http://todos.internal"

func useTodos(hc *http.Client, out io.Writer) error {
	for _, title := range []string{"write the adapter", "ship it"} {
		res, err := hc.Post(base+"/todos", "application/json", strings.NewReader(`{"title":"`+title+`"}`))
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Fprintf(out, "POST /todos -> %d %s %s", res.StatusCode, res.Header.Get("Location"), body)
	}
	for _, path := range []string{"/todos/2", "/todos/9"} {
		res, err := hc.Get(base + path)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Fprintf(out, "GET %s -> %d %s", path, res.StatusCode, body)
	}
	// A streamed response: each line as the handler flushes it.
	res, err := hc.Get(base + "/countdown?from=3")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	lines := bufio.NewScanner(res.Body)
	for lines.Scan() {
		fmt.Fprintln(out, "GET /countdown:", lines.Text())
	}
	return lines.Err()
}
