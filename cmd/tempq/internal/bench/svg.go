package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// colours of the contenders, in the order of Contenders.
var colours = map[string]string{
	TempQueues:              "#1b7837",
	TempQueuesFewerCalls:    "#7fbc41",
	TempQueuesNoCompression: "#a6dba0",
	// The send policies: browns and a teal, apart from the others.
	TempQueuesSimpleBatching: "#8c510a",
	TempQueuesNoGather:       "#bf812d",
	TempQueuesNoAnnounce:     "#dfc27d",
	TempQueuesNoOvertake:     "#80cdc1",
	ExtendedClient:           "#762a83",
	QueuePerRequest:          "#b2182b",
	StaticReplyQueue:         "#2166ac",
	ParkedReceivers:          "#e08214",
	Floor:                    "#555555",
}

// series is one line of a chart: a value per concurrency level.
type series struct {
	name   string
	colour string
	dashed bool
	values []float64 // NaN or <= 0: no point
}

// chart is a line chart over the concurrency levels with a logarithmic
// value axis.
type chart struct {
	title, yLabel string
	xs            []int
	lines         []series
}

// WriteLatencySVG plots p50 (solid) and p99 (dashed) latency by
// concurrency, per contender.
func WriteLatencySVG(w io.Writer, r *Report) error {
	c := chart{title: "Round-trip latency by concurrent callers (solid p50, dashed p99)", yLabel: "milliseconds", xs: r.Concurrency}
	for _, name := range contendersIn(r) {
		p50, p99 := make([]float64, len(r.Concurrency)), make([]float64, len(r.Concurrency))
		for i, conc := range r.Concurrency {
			if res := r.Find(name, conc); res != nil && res.RPCs > 0 {
				p50[i], p99[i] = res.P50ms, res.P99ms
			}
		}
		c.lines = append(c.lines, series{name: name, colour: colours[name], values: p50},
			series{name: name + " p99", colour: colours[name], dashed: true, values: p99})
	}
	return c.write(w)
}

// WriteCallsSVG plots API calls per RPC by concurrency, per contender.
func WriteCallsSVG(w io.Writer, r *Report) error {
	c := chart{title: "Billed SQS API calls per RPC by concurrent callers", yLabel: "API calls per RPC", xs: r.Concurrency}
	for _, name := range contendersIn(r) {
		v := make([]float64, len(r.Concurrency))
		for i, conc := range r.Concurrency {
			if res := r.Find(name, conc); res != nil && res.RPCs > 0 {
				v[i] = res.APICallsPerRPC
			}
		}
		c.lines = append(c.lines, series{name: name, colour: colours[name], values: v})
	}
	return c.write(w)
}

// WriteThroughputSVG plots RPCs per second by concurrency, per contender.
func WriteThroughputSVG(w io.Writer, r *Report) error {
	c := chart{title: "Throughput by concurrent callers", yLabel: "RPCs per second", xs: r.Concurrency}
	for _, name := range contendersIn(r) {
		v := make([]float64, len(r.Concurrency))
		for i, conc := range r.Concurrency {
			if res := r.Find(name, conc); res != nil {
				v[i] = res.RPCPerSecond
			}
		}
		c.lines = append(c.lines, series{name: name, colour: colours[name], values: v})
	}
	return c.write(w)
}

// WriteCPUSVG plots the benchmark process's CPU time per RPC by
// concurrency, per contender; a result without the figure has no point.
func WriteCPUSVG(w io.Writer, r *Report) error {
	title := "CPU time of the benchmark process per RPC by concurrent callers"
	if r.CPUIncludesServer {
		title += " (server included)"
	}
	c := chart{title: title, yLabel: "CPU microseconds per RPC", xs: r.Concurrency}
	for _, name := range contendersIn(r) {
		v := make([]float64, len(r.Concurrency))
		for i, conc := range r.Concurrency {
			if res := r.Find(name, conc); res != nil {
				v[i] = res.CPUMicrosPerRPC
			}
		}
		c.lines = append(c.lines, series{name: name, colour: colours[name], values: v})
	}
	return c.write(w)
}

// plotOrder is the order of the contenders in the plots: tempqueues and
// its other configurations (send policies included) first, then the others as in Contenders, then
// the extended client.
var plotOrder = append(append(append([]string{TempQueues, TempQueuesFewerCalls, TempQueuesNoCompression}, PolicyContenders...), Contenders[1:]...), ExtendedClient)

func contendersIn(r *Report) []string {
	var names []string
	for _, n := range plotOrder {
		for _, res := range r.Results {
			if res.Contender == n {
				names = append(names, n)
				break
			}
		}
	}
	return names
}

const (
	svgW, svgH                   = 760, 440
	padL, padR, padT, padB       = 70, 190, 40, 50
	plotW, plotH                 = svgW - padL - padR, svgH - padT - padB
	legendX, legendY, legendStep = svgW - padR + 16, padT + 10, 20
)

func (c chart) write(w io.Writer) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range c.lines {
		for _, v := range l.values {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	// Whole decades around the data.
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	y := func(v float64) float64 { return padT + plotH - (math.Log10(v)-dlo)/(dhi-dlo)*plotH }
	x := func(i int) float64 {
		if len(c.xs) == 1 {
			return padL + plotW/2
		}
		// Concurrency levels grow geometrically: space them evenly.
		return padL + 20 + float64(i)*(plotW-40)/float64(len(c.xs)-1)
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", padL, html.EscapeString(c.title))
	// Grid: a line per decade, lighter ones at 2 and 5.
	for d := dlo; d <= dhi; d++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, d)
			if math.Log10(v) > dhi+1e-9 {
				break
			}
			yy := y(v)
			stroke := "#dddddd"
			if m == 1 {
				stroke = "#aaaaaa"
			}
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", padL, yy, padL+plotW, yy, stroke)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", padL-6, yy, number(v))
		}
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", padL, padT, plotW, plotH)
	for i, xv := range c.xs {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(i), padT+plotH+18, xv)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">concurrent callers</text>`+"\n", padL+plotW/2, svgH-10)
	fmt.Fprintf(&b, `<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`+"\n", padT+plotH/2, padT+plotH/2, html.EscapeString(c.yLabel))

	for li, l := range c.lines {
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		var pts []string
		for i, v := range l.values {
			if v > 0 && i < len(c.xs) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
			}
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", l.colour, dash, strings.Join(pts, " "))
		}
		for i, v := range l.values {
			if v > 0 && i < len(c.xs) {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %d callers: %s</title></circle>`+"\n",
					x(i), y(v), l.colour, html.EscapeString(l.name), c.xs[i], number(v))
			}
		}
		ly := legendY + li*legendStep
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", legendX, ly, legendX+24, ly, l.colour, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", legendX+30, ly, html.EscapeString(l.name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// number formats an axis or point value briefly.
func number(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", v), "0"), ".")
	default:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
	}
}

// WriteFrontSVG plots, for one setting of a sweep, each contender's API
// calls per RPC (y) against its p50 latency (x) at every concurrency: one
// point per contender and concurrency, labelled with the number of
// callers, the points of a contender joined in the order of concurrency.
// Lower left is better on both: the plot shows what each contender pays
// in calls for its latency.
func WriteFrontSVG(w io.Writer, setting string, r *Report) error {
	p := scatter{title: "API calls per RPC against p50 latency", subtitle: setting, xLabel: "p50 latency, milliseconds", yLabel: "API calls per RPC"}
	for _, name := range contendersIn(r) {
		l := path{name: name, colour: colours[name]}
		for _, conc := range r.Concurrency {
			if res := r.Find(name, conc); res != nil && res.RPCs > 0 && res.P50ms > 0 && res.APICallsPerRPC > 0 {
				l.points = append(l.points, point{x: res.P50ms, y: res.APICallsPerRPC, label: conc})
			}
		}
		p.paths = append(p.paths, l)
	}
	return p.write(w)
}

type point struct {
	x, y  float64
	label int
}

// path is one contender's points, joined in order.
type path struct {
	name, colour string
	points       []point
}

// scatter is a plot of labelled points with logarithmic axes.
type scatter struct {
	title, subtitle string
	xLabel, yLabel  string
	paths           []path
}

// decades returns the whole decades of a log axis around values, or 1 to
// 10 without any.
func decades(values []float64) (lo, hi float64) {
	mn, mx := math.Inf(1), math.Inf(-1)
	for _, v := range values {
		if v > 0 {
			mn, mx = math.Min(mn, v), math.Max(mx, v)
		}
	}
	if math.IsInf(mn, 1) {
		return 0, 1
	}
	lo, hi = math.Floor(math.Log10(mn)), math.Ceil(math.Log10(mx))
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi
}

// ticks returns the grid values 1, 2 and 5 times each power of ten from
// 10^lo to 10^hi, and whether each is a whole decade.
func ticks(lo, hi float64) (vs []float64, major []bool) {
	for d := lo; d <= hi; d++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, d)
			if math.Log10(v) > hi+1e-9 {
				break
			}
			vs, major = append(vs, v), append(major, m == 1)
		}
	}
	return vs, major
}

func (c scatter) write(w io.Writer) error {
	var xs, ys []float64
	for _, l := range c.paths {
		for _, p := range l.points {
			xs, ys = append(xs, p.x), append(ys, p.y)
		}
	}
	xlo, xhi := decades(xs)
	ylo, yhi := decades(ys)
	x := func(v float64) float64 { return padL + (math.Log10(v)-xlo)/(xhi-xlo)*plotW }
	y := func(v float64) float64 { return padT + plotH - (math.Log10(v)-ylo)/(yhi-ylo)*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(&b, `<text x="%d" y="17" font-size="14" font-weight="bold">%s</text>`+"\n", padL, html.EscapeString(c.title))
	fmt.Fprintf(&b, `<text x="%d" y="33">%s</text>`+"\n", padL, html.EscapeString(c.subtitle))
	vs, major := ticks(ylo, yhi)
	for i, v := range vs {
		stroke := "#dddddd"
		if major[i] {
			stroke = "#aaaaaa"
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", padL, y(v), padL+plotW, y(v), stroke)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", padL-6, y(v), number(v))
	}
	vs, major = ticks(xlo, xhi)
	for i, v := range vs {
		stroke := "#dddddd"
		if major[i] {
			stroke = "#aaaaaa"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x(v), padT, x(v), padT+plotH, stroke)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(v), padT+plotH+18, number(v))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", padL, padT, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", padL+plotW/2, svgH-10, html.EscapeString(c.xLabel))
	fmt.Fprintf(&b, `<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`+"\n", padT+plotH/2, padT+plotH/2, html.EscapeString(c.yLabel))

	for li, l := range c.paths {
		var pts []string
		for _, p := range l.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.x), y(p.y)))
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", l.colour, strings.Join(pts, " "))
		}
		for _, p := range l.points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %d callers: p50 %s ms, %s calls per RPC</title></circle>`+"\n",
				x(p.x), y(p.y), l.colour, html.EscapeString(l.name), p.label, number(p.x), number(p.y))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="9" fill="%s">%d</text>`+"\n", x(p.x)+4, y(p.y)-4, l.colour, p.label)
		}
		ly := legendY + li*legendStep
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", legendX, ly, legendX+24, ly, l.colour)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", legendX+30, ly, html.EscapeString(l.name))
	}
	ly := legendY + len(c.paths)*legendStep + 10
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" fill="#555">labels: callers</text>`+"\n", legendX, ly)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" fill="#555">lower left is better</text>`+"\n", legendX, ly+14)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
