package bench

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The charts are drawn with gonum.org/v1/plot (only this package imports it): the
// throughput bars with each measurement's ceiling marked, the end-to-end latency
// distributions on log axes with their percentiles labelled, the latency of the e2e run
// over time, and the sustained runs second by second.

var palette = map[string]color.RGBA{
	"sluice": {0x1f, 0x77, 0xb4, 0xff}, "kafka": {0xd6, 0x27, 0x28, 0xff},
	"nats": {0x2c, 0xa0, 0x2c, 0xff}, "ceiling": {0x40, 0x40, 0x40, 0xff},
	"relay": {0x40, 0x40, 0x40, 0xff}, // the latency ceiling
}

// chartW and chartH are the size of every chart.
const (
	chartW = 24 * vg.Centimeter
	chartH = 12 * vg.Centimeter
)

// newPlot returns a plot with the common look: a title, axis labels, a grid, the legend
// at the top left.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return p
}

// line returns a solid line through xys in color col, width w points; dashed if dash.
func line(xys plotter.XYs, col color.Color, w float64, dash bool) (*plotter.Line, error) {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	l.Color, l.Width = col, vg.Points(w)
	if dash {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	return l, nil
}

// ThroughputChart draws MB/s per measurement, a bar per system, and each measurement's
// ceiling (tcp or sendfile, same run) as a black dashed mark across its group.
func (s *Suite) ThroughputChart(path string) error {
	p := newPlot("Throughput, MB/s of record values (higher is better)", "", "MB/s")
	systems := []string{"sluice", "kafka", "nats"}
	labels := []string{"produce 1 KiB", "produce 100 B", "consume after restart", "consume page cache", "consume memory"}
	p.NominalX(labels...)
	barW := vg.Points(26)
	for i, sys := range systems {
		vals := make(plotter.Values, len(measureTitles))
		var xys plotter.XYs
		var text []string
		for g, mt := range measureTitles {
			vals[g] = s.mbpsOf(sys, mt.m)
			if vals[g] > 0 {
				xys = append(xys, plotter.XY{X: float64(g), Y: vals[g]})
				text = append(text, fmt.Sprintf("%.0f", vals[g]))
			}
		}
		bars, err := plotter.NewBarChart(vals, barW)
		if err != nil {
			return err
		}
		bars.Color, bars.LineStyle.Width = palette[sys], 0
		bars.Offset = barW * vg.Length(i-len(systems)/2)
		p.Add(bars)
		p.Legend.Add(sys, bars)
		if len(xys) > 0 {
			lab, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: text})
			if err != nil {
				return err
			}
			for j := range lab.TextStyle {
				lab.TextStyle[j].XAlign, lab.TextStyle[j].YAlign = draw.XCenter, draw.YBottom
				lab.TextStyle[j].Font.Size = vg.Points(8)
			}
			lab.Offset = vg.Point{X: bars.Offset}
			p.Add(lab)
		}
	}
	added := false
	top := 0.0
	for g, mt := range measureTitles {
		c := s.mbpsOf("ceiling", mt.m)
		if c <= 0 {
			continue
		}
		top = max(top, c)
		l, err := line(plotter.XYs{{X: float64(g) - 0.45, Y: c}, {X: float64(g) + 0.45, Y: c}}, palette["ceiling"], 2, true)
		if err != nil {
			return err
		}
		// The ceiling's value, above the right end of its mark, where no bar reaches.
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: float64(g) + 0.45, Y: c}},
			Labels: []string{fmt.Sprintf("ceiling %.0f", c)}})
		if err != nil {
			return err
		}
		lab.TextStyle[0].XAlign, lab.TextStyle[0].YAlign = draw.XRight, draw.YBottom
		lab.TextStyle[0].Font.Size, lab.TextStyle[0].Color = vg.Points(8), palette["ceiling"]
		lab.Offset = vg.Point{Y: vg.Points(3)} // clear of the dashes
		p.Add(l, lab)
		if !added {
			p.Legend.Add("ceiling (tcp, or sendfile for the page cache)", l)
			added = true
		}
	}
	p.Y.Min = 0
	p.Y.Max = max(p.Y.Max, top*1.08) // room for the highest ceiling's label inside the frame
	return p.Save(chartW, chartH, path)
}

// mbpsOf maps "ceiling" to each measurement's ceiling.
func (s *Suite) mbpsOf(sys, m string) float64 {
	if sys == "ceiling" {
		sys = ceilingOf(m)
	}
	return s.mbps(sys, m)
}

// nines maps a fraction of records to the chart's percentile axis: -log10(1-f), so that
// p50, p90, p99, p99.9 are evenly spaced and the tail gets the room it needs.
func nines(f float64) float64 { return -math.Log10(max(1-f, 1e-5)) }

// percentileTicks label the percentile axis.
var percentileTicks = plot.ConstantTicks{
	{Value: nines(0), Label: "p0"}, {Value: nines(0.5), Label: "p50"}, {Value: nines(0.9), Label: "p90"},
	{Value: nines(0.99), Label: "p99"}, {Value: nines(0.999), Label: "p99.9"}, {Value: nines(0.9999), Label: "p99.99"},
	{Value: nines(1), Label: "max"},
}

// ErrNoData is what a chart returns when the suite measured nothing it draws (a narrow
// run without its part): there is then no file. A log axis with no values would not
// draw at all (gonum panics on it).
var ErrNoData = errors.New("nothing to draw")

// hasAny reports whether one of systems has a result of one of the measurements ms that
// ok accepts.
func (s *Suite) hasAny(systems, ms []string, ok func(*Result) bool) bool {
	for _, sys := range systems {
		for _, m := range ms {
			if r := s.Results[sys][m]; r != nil && ok(r) {
				return true
			}
		}
	}
	return false
}

// LatencyChart draws the end-to-end latency distribution of each system, 4 partitions,
// at half load (solid) and at 10 000 records/s (dashed): x the latency on a log scale, y
// the percentile on a scale of nines (p50, p90, p99, p99.9 evenly spaced), with p50, p99
// and p99.9 labelled on each curve.
func (s *Suite) LatencyChart(path string) error {
	systems := []string{"sluice", "kafka", "nats", "relay"}
	if !s.hasAny(systems, []string{ME2EHalf, ME2E10K}, func(r *Result) bool { return r.Latency != nil }) {
		return ErrNoData
	}
	title := "End-to-end latency, 4 partitions, half of each system's maximum rate"
	if s.hasAny(systems, []string{ME2E10K}, func(r *Result) bool { return r.Latency != nil }) {
		title = "End-to-end latency, 4 partitions: half of each system's maximum rate (solid), 10 000 records/s (dashed)"
	}
	p := newPlot(title+s.keptNote(), "latency (log scale)", "percentile")
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, latencyTicks{}
	p.Y.Tick.Marker = percentileTicks
	p.Y.Min, p.Y.Max = 0, nines(1)
	for _, run := range []struct {
		m    string
		dash bool
	}{{ME2EHalf, false}, {ME2E10K, true}} {
		for _, sys := range systems {
			r := s.Results[sys][run.m]
			if r == nil || r.Latency == nil {
				continue
			}
			if err := addCDF(p, sys, r, run.dash); err != nil {
				return err
			}
		}
	}
	return p.Save(chartW, chartH, path)
}

// addCDF adds one run's latency curve to p, with its p50, p99 and p99.9 marked by dots
// and given in its legend entry: labels beside the dots overlapped wherever curves run
// close (the p50s of every fast run lie within a few hundred µs).
func addCDF(p *plot.Plot, sys string, r *Result, dash bool) error {
	var xys plotter.XYs
	for _, pt := range r.Latency.CDF {
		xys = append(xys, plotter.XY{X: max(pt.Micros, 1), Y: nines(pt.Fraction)})
	}
	l, err := line(xys, palette[sys], 2, dash)
	if err != nil {
		return err
	}
	lt := r.Latency
	p.Add(l)
	p.Legend.Add(fmt.Sprintf("%s, %.0f/s: p50 %s, p99 %s, p99.9 %s", sys, r.Config.Rate,
		fmtMicros(lt.P50), fmtMicros(lt.P99), fmtMicros(lt.P999)), l)
	marks := plotter.XYs{{X: lt.P50, Y: nines(0.5)}, {X: lt.P99, Y: nines(0.99)}, {X: lt.P999, Y: nines(0.999)}}
	sc, err := plotter.NewScatter(marks)
	if err != nil {
		return err
	}
	sc.GlyphStyle.Color, sc.GlyphStyle.Radius, sc.GlyphStyle.Shape = palette[sys], vg.Points(3), draw.CircleGlyph{}
	p.Add(sc)
	return nil
}

// latencyTicks marks a log latency axis (µs) at every power of ten, labelled with units;
// over less than two decades the 2× and 5× ticks are labelled too, so that an axis of
// 5-90 ms does not read "10 ms" alone.
type latencyTicks struct{}

// Ticks returns the ticks between lo and hi.
func (latencyTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	few := hi/max(lo, 1) < 100
	for v := math.Pow(10, math.Floor(math.Log10(max(lo, 1)))); v <= hi*1.0001; v *= 10 {
		if v >= lo*0.9999 {
			ts = append(ts, plot.Tick{Value: v, Label: fmtMicros(v)})
		}
		for m := 2.0; m < 10; m++ {
			if x := v * m; x >= lo && x <= hi {
				t := plot.Tick{Value: x}
				if few && (m == 2 || m == 5) {
					t.Label = fmtMicros(x)
				}
				ts = append(ts, t)
			}
		}
	}
	return ts
}

// LatencyOverTimeChart draws the latency of the half-load e2e run over time: for each
// system the p99 of every 250 ms (solid) and its max (dashed), log scale, so that spikes
// show.
func (s *Suite) LatencyOverTimeChart(path string) error {
	systems := []string{"sluice", "kafka", "nats"}
	if !s.hasAny(systems, []string{ME2EHalf}, func(r *Result) bool { return len(r.LatencySeries) > 0 }) {
		return ErrNoData
	}
	p := newPlot("End-to-end latency over time at half load: p99 (solid) and max (dashed) of each 250 ms"+s.keptNote(),
		"seconds into the measured run", "latency (log scale)")
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, latencyTicks{}
	for _, sys := range systems {
		r := s.Results[sys][ME2EHalf]
		if r == nil || len(r.LatencySeries) == 0 {
			continue
		}
		var p99, mx plotter.XYs
		for _, pt := range measuredSeries(r.LatencySeries) {
			p99 = append(p99, plotter.XY{X: pt.At, Y: max(pt.P99, 1)})
			mx = append(mx, plotter.XY{X: pt.At, Y: max(pt.Max, 1)})
		}
		l, err := line(p99, palette[sys], 1.5, false)
		if err != nil {
			return err
		}
		d, err := line(mx, palette[sys], 0.8, true)
		if err != nil {
			return err
		}
		p.Add(l, d)
		p.Legend.Add(sys, l)
	}
	return p.Save(chartW, chartH, path)
}

// SustainedChart draws the sustained 1 KiB runs' MB/s second by second, one line per
// system, with the disk ceilings as dashed horizontal lines.
func (s *Suite) SustainedChart(path string) error {
	p := newPlot("Sustained produce, 1 KiB records: MB/s sent each second, and the disk ceilings",
		"seconds", "MB/s")
	maxT := 1.0
	for _, sys := range []string{"sluice", "kafka", "nats"} {
		r := s.Results[sys][MSustain1K]
		if r == nil || len(r.Series) == 0 {
			continue
		}
		var xys plotter.XYs
		for j, v := range r.Series {
			xys = append(xys, plotter.XY{X: float64(j + 1), Y: v})
		}
		maxT = max(maxT, float64(len(r.Series)))
		l, err := line(xys, palette[sys], 1.5, false)
		if err != nil {
			return err
		}
		p.Add(l)
		p.Legend.Add(sys, l)
	}
	for _, d := range s.Disk {
		if d.MBPerSec <= 0 {
			continue
		}
		l, err := line(plotter.XYs{{X: 0, Y: d.MBPerSec}, {X: maxT, Y: d.MBPerSec}}, palette["ceiling"], 1, true)
		if err != nil {
			return err
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s ceiling %.0f MB/s", strings.ToLower(d.Mode), d.MBPerSec), l)
	}
	// The legend goes top right, above the lines (a quarter of the height kept free):
	// top left, it covered the first seconds, where the runs start fastest.
	p.Legend.Left = false
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.3
	return p.Save(chartW, chartH, path)
}

// measuredSeries drops the warm-up's points of a latency series, if any: results written
// before the sampler dropped them itself have them first, counted from the run's start
// (the times go back once the measured part starts).
func measuredSeries(pts []SeriesPoint) []SeriesPoint {
	for i := len(pts) - 1; i > 0; i-- {
		if pts[i].At < pts[i-1].At {
			return pts[i:]
		}
	}
	return pts
}
