// Package console is the web console of tempq: a few server-rendered pages
// that show an SQS endpoint's queues, its temporary host queues and
// sweeper lease, and its API calls per second, and that send, purge,
// delete and move messages. tempq emulator serves it at /ui/ on the
// emulator's port, with the emulator's own powers (peek, every call
// counted); tempq console serves it for any endpoint through the SQS API.
//
// Pages are html/template, refreshed by a little plain JavaScript that
// fetches server-rendered fragments; there is no build step. Nothing
// changes on GET: every action is a POST carrying the console's CSRF
// token, and requests whose Host is not a loopback name are refused, so
// that neither another site nor a DNS-rebinding page can drive it.
package console

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tempqueues/tempqueues/internal/callcount"
	"github.com/tempqueues/tempqueues/reaper"
	"github.com/tempqueues/tempqueues/sqsapi"
	"github.com/tempqueues/tempqueues/sqstest"
)

// Path is where the console is mounted: every URL it serves starts so.
const Path = "/ui/"

// Client is the SQS operations the console calls; *sqs.Client has them.
type Client interface {
	sqsapi.Client
	StartMessageMoveTask(ctx context.Context, params *sqs.StartMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
	ListMessageMoveTasks(ctx context.Context, params *sqs.ListMessageMoveTasksInput, optFns ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error)
	CancelMessageMoveTask(ctx context.Context, params *sqs.CancelMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.CancelMessageMoveTaskOutput, error)
	ListDeadLetterSourceQueues(ctx context.Context, params *sqs.ListDeadLetterSourceQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
}

// Emulator is what the console reads directly from an in-process sqstest
// server: messages without receiving them, and every call it served.
// *sqstest.Server implements it.
type Emulator interface {
	Messages(queue string) ([]sqstest.Message, error)
	Calls() map[string]int64
}

// Options configure a Console. Zero values mean the documented defaults.
type Options struct {
	// Logger receives the errors of API calls made for pages; nil logs
	// nothing.
	Logger *slog.Logger
	// Emulator, when set, is the server the client talks to: the console
	// then peeks at messages, shows the age of the oldest message, and
	// charts every call the server served. Nil for any other endpoint.
	Emulator Emulator
	// ReadOnly hides every action and refuses its POST: the default of
	// tempq console on AWS.
	ReadOnly bool
	// Counter counts the calls of the console's own client: charted as
	// the console's calls, and subtracted from the Emulator's counts.
	Counter *callcount.Counter
	// Prefix is the temporary queues' prefix, as in reaper.Options; default
	// sqsapi.DefaultQueuePrefix.
	Prefix string
	// SweepPeriod is the fleet's sweep period, as in reaper.Options, for
	// the next sweep's time; default 5 minutes.
	SweepPeriod time.Duration
	// Where names the endpoint in the page header, e.g. "emulator at
	// http://127.0.0.1:4566".
	Where string
	// Refresh is how often pages refresh their live parts; default 2 s.
	Refresh time.Duration
}

// Console is the web console: an http.Handler for the paths under Path.
type Console struct {
	client  Client
	opts    Options
	sweeper *reaper.Sweeper
	csrf    string
	pages   map[string]*template.Template
	static  http.Handler
	mux     *http.ServeMux
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New returns a Console for client. It makes no API call and starts no
// goroutine.
func New(client Client, optFns ...func(*Options)) (*Console, error) {
	var o Options
	for _, fn := range optFns {
		fn(&o)
	}
	o.Prefix = cmp.Or(o.Prefix, sqsapi.DefaultQueuePrefix)
	o.Refresh = cmp.Or(o.Refresh, 2*time.Second)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	sw, err := reaper.NewSweeper(client, func(ro *reaper.SweeperOptions) {
		ro.Prefix = o.Prefix
		ro.Period = o.SweepPeriod
	})
	if err != nil {
		return nil, err
	}
	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		return nil, fmt.Errorf("console: CSRF token: %w", err)
	}
	c := &Console{client: client, opts: o, sweeper: sw, csrf: hex.EncodeToString(token), pages: map[string]*template.Template{}}
	for _, page := range []string{"queues", "queue", "temporary", "calls"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", page, err)
		}
		c.pages[page] = t
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	c.static = http.StripPrefix(Path+"static/", http.FileServerFS(sub))
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET "+Path+"{$}", readPage(c, "queues", "Queues", c.queues))
	m.HandleFunc("GET "+Path+"queue", c.queuePage)
	m.HandleFunc("GET "+Path+"temporary", readPage(c, "temporary", "Temporary queues", c.temporaries))
	m.HandleFunc("GET "+Path+"calls", c.callsPage)
	m.HandleFunc("GET "+Path+"calls.json", c.callsJSON)
	m.Handle("GET "+Path+"static/", c.static)
	m.HandleFunc("POST "+Path+"send", c.action(c.send))
	m.HandleFunc("POST "+Path+"purge", c.action(c.purge))
	m.HandleFunc("POST "+Path+"delete", c.action(c.deleteQueue))
	m.HandleFunc("POST "+Path+"move", c.action(c.startMove))
	m.HandleFunc("POST "+Path+"cancel-move", c.action(c.cancelMove))
	c.mux = m
}

// ServeHTTP serves the console's pages, fragments, scripts and actions.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !loopbackHost(r.Host) {
		// A page of another site that rebound its name to 127.0.0.1 would
		// send its own Host: it gets nothing, not even the CSRF token.
		http.Error(w, "tempq console: only loopback host names (127.0.0.1, [::1], localhost) are served", http.StatusForbidden)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: with no-referrer, browsers send
	// "Origin: null" on form POSTs, which checkPost would refuse.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// loopbackHost reports whether a Host header names this machine only.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errForbidden is the answer to a POST without the console's token, from
// another origin, or to a read-only console.
var errForbidden = errors.New("forbidden")

// checkPost checks a POST's CSRF token and origin, and that actions are
// allowed.
func (c *Console) checkPost(r *http.Request) error {
	if c.opts.ReadOnly {
		return fmt.Errorf("%w: this console is read-only (on AWS, start it with --allow-actions)", errForbidden)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return fmt.Errorf("%w: cross-site request (%s)", errForbidden, site)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if u, err := url.Parse(origin); err != nil || u.Host != r.Host {
			return fmt.Errorf("%w: request from origin %q", errForbidden, origin)
		}
	}
	got := r.PostFormValue("csrf")
	if subtle.ConstantTimeCompare([]byte(got), []byte(c.csrf)) != 1 {
		return fmt.Errorf("%w: missing or wrong CSRF token; reload the page", errForbidden)
	}
	return nil
}
