package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Charts are drawn with the standard image packages and x/image's fixed 7x13 font:
// a grouped bar chart of throughput and a latency CDF. They are plain on purpose.

var palette = map[string]color.RGBA{
	"sluice": {0x1f, 0x77, 0xb4, 0xff}, "kafka": {0xd6, 0x27, 0x28, 0xff},
	"nats": {0x2c, 0xa0, 0x2c, 0xff}, "ceiling": {0x7f, 0x7f, 0x7f, 0xff},
}

type canvas struct{ *image.RGBA }

func newCanvas(w, h int) canvas {
	c := canvas{image.NewRGBA(image.Rect(0, 0, w, h))}
	draw.Draw(c, c.Bounds(), image.White, image.Point{}, draw.Src)
	return c
}

func (c canvas) rect(x0, y0, x1, y1 int, col color.Color) {
	draw.Draw(c, image.Rect(x0, y0, x1, y1), &image.Uniform{col}, image.Point{}, draw.Src)
}

func (c canvas) text(x, y int, s string, col color.Color) {
	d := &font.Drawer{Dst: c, Src: &image.Uniform{col}, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// line draws a 2-pixel segment (DDA).
func (c canvas) line(x0, y0, x1, y1 int, col color.Color) {
	n := max(abs(x1-x0), abs(y1-y0), 1)
	for i := 0; i <= n; i++ {
		x := x0 + (x1-x0)*i/n
		y := y0 + (y1-y0)*i/n
		c.Set(x, y, col)
		c.Set(x+1, y, col)
		c.Set(x, y+1, col)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func (c canvas) save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, c); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ThroughputChart draws MB/s per measurement, one bar per system.
func (s *Suite) ThroughputChart(path string) error {
	const W, H, left, bottom, top = 900, 420, 60, 60, 40
	c := newCanvas(W, H)
	systems := []string{"sluice", "kafka", "nats", "ceiling"}
	maxV := 1.0
	for _, mt := range measureTitles {
		for _, sys := range systems {
			maxV = max(maxV, s.mbpsOf(sys, mt.m))
		}
	}
	c.text(left, 20, "Throughput, MB/s of record values (higher is better)", color.Black)
	plotH := H - bottom - top
	c.line(left, H-bottom, W-10, H-bottom, color.Black)
	c.line(left, top, left, H-bottom, color.Black)
	for i := 0; i <= 4; i++ {
		v := maxV * float64(i) / 4
		y := H - bottom - int(float64(plotH)*float64(i)/4)
		c.text(5, y+4, fmt.Sprintf("%.0f", v), color.Black)
	}
	groupW := (W - left - 20) / len(measureTitles)
	barW := groupW / (len(systems) + 1)
	labels := []string{"produce 1 KiB", "produce 100 B", "consume page cache", "consume memory"}
	for g, mt := range measureTitles {
		x0 := left + 10 + g*groupW
		for i, sys := range systems {
			v := s.mbpsOf(sys, mt.m)
			h := int(float64(plotH) * v / maxV)
			x := x0 + i*barW
			c.rect(x, H-bottom-h, x+barW-4, H-bottom, palette[sys])
			if v > 0 {
				c.text(x, H-bottom-h-3, fmt.Sprintf("%.0f", v), color.Black)
			}
		}
		c.text(x0, H-bottom+18, labels[g], color.Black)
	}
	for i, sys := range systems {
		x := left + 10 + i*120
		c.rect(x, H-22, x+12, H-10, palette[sys])
		c.text(x+16, H-11, sys, color.Black)
	}
	return c.save(path)
}

// mbpsOf maps "ceiling" to each measurement's ceiling.
func (s *Suite) mbpsOf(sys, m string) float64 {
	if sys == "ceiling" {
		sys = ceilingOf(m)
	}
	return s.mbps(sys, m)
}

// LatencyChart draws the CDF of the end-to-end latencies at half load: x the latency on
// a log scale, y the fraction of records at or below it.
func (s *Suite) LatencyChart(path string) error {
	const W, H, left, bottom, top, right = 900, 420, 60, 50, 40, 20
	c := newCanvas(W, H)
	c.text(left, 20, "End-to-end latency CDF at half of each system's maximum rate (log scale)", color.Black)
	lo, hi := 10.0, 1e5 // µs
	for _, sys := range []string{"sluice", "kafka", "nats"} {
		if r := s.Results[sys][ME2EHalf]; r != nil && r.Latency != nil {
			hi = max(hi, r.Latency.Max*1.2)
		}
	}
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	plotW, plotH := W-left-right, H-bottom-top
	xOf := func(us float64) int {
		us = min(max(us, lo), hi)
		return left + int(float64(plotW)*(math.Log10(us)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo)))
	}
	yOf := func(f float64) int { return H - bottom - int(float64(plotH)*f) }
	c.line(left, H-bottom, W-right, H-bottom, color.Black)
	c.line(left, top, left, H-bottom, color.Black)
	grey := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	for us := lo; us <= hi; us *= 10 {
		x := xOf(us)
		c.rect(x, top, x+1, H-bottom, grey)
		c.text(x-10, H-bottom+15, fmtMicros(us), color.Black)
	}
	for _, f := range []float64{0.5, 0.9, 0.99, 1} {
		y := yOf(f)
		c.rect(left, y, W-right, y+1, grey)
		c.text(5, y+4, fmt.Sprintf("%g", f), color.Black)
	}
	i := 0
	for _, sys := range []string{"sluice", "kafka", "nats"} {
		r := s.Results[sys][ME2EHalf]
		if r == nil || r.Latency == nil {
			continue
		}
		pts := r.Latency.CDF
		for j := 1; j < len(pts); j++ {
			c.line(xOf(pts[j-1].Micros), yOf(pts[j-1].Fraction), xOf(pts[j].Micros), yOf(pts[j].Fraction), palette[sys])
		}
		x := left + 10 + i*120
		c.rect(x, H-22, x+12, H-10, palette[sys])
		c.text(x+16, H-11, sys, color.Black)
		i++
	}
	return c.save(path)
}

// SustainedChart draws the sustained 1 KiB runs' MB/s second by second, one line per
// system, with the disk ceilings as horizontal lines.
func (s *Suite) SustainedChart(path string) error {
	const W, H, left, bottom, top, right = 900, 420, 60, 50, 40, 20
	c := newCanvas(W, H)
	c.text(left, 20, "Sustained produce, 1 KiB records: MB/s sent each second, and the disk ceilings", color.Black)
	maxV, maxT := 1.0, 1
	for _, sys := range []string{"sluice", "kafka", "nats"} {
		if r := s.Results[sys][MSustain1K]; r != nil {
			maxT = max(maxT, len(r.Series))
			for _, v := range r.Series {
				maxV = max(maxV, v)
			}
		}
	}
	for _, d := range s.Disk {
		maxV = max(maxV, d.MBPerSec)
	}
	maxV *= 1.1
	plotW, plotH := W-left-right, H-bottom-top
	xOf := func(sec int) int { return left + plotW*sec/maxT }
	yOf := func(v float64) int { return H - bottom - int(float64(plotH)*v/maxV) }
	c.line(left, H-bottom, W-right, H-bottom, color.Black)
	c.line(left, top, left, H-bottom, color.Black)
	grey := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	for i := 0; i <= 4; i++ {
		v := maxV * float64(i) / 4
		c.rect(left, yOf(v), W-right, yOf(v)+1, grey)
		c.text(5, yOf(v)+4, fmt.Sprintf("%.0f", v), color.Black)
	}
	for sec := 0; sec <= maxT; sec += max(10, maxT/10/10*10) {
		c.text(xOf(sec)-8, H-bottom+15, fmt.Sprintf("%ds", sec), color.Black)
	}
	for _, d := range s.Disk {
		if d.MBPerSec > 0 {
			y := yOf(d.MBPerSec)
			for x := left; x < W-right; x += 12 { // dashed
				c.rect(x, y, x+6, y+2, palette["ceiling"])
			}
			c.text(W-right-200, y-4, fmt.Sprintf("%s ceiling %.0f MB/s", d.Mode, d.MBPerSec), color.Black)
		}
	}
	i := 0
	for _, sys := range []string{"sluice", "kafka", "nats"} {
		r := s.Results[sys][MSustain1K]
		if r == nil || len(r.Series) == 0 {
			continue
		}
		for j := 1; j < len(r.Series); j++ {
			c.line(xOf(j-1), yOf(r.Series[j-1]), xOf(j), yOf(r.Series[j]), palette[sys])
		}
		x := left + 10 + i*120
		c.rect(x, H-22, x+12, H-10, palette[sys])
		c.text(x+16, H-11, sys, color.Black)
		i++
	}
	return c.save(path)
}
