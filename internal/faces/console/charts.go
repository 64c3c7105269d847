package console

import (
	"fmt"
	"html"
	"math"
	"strings"
	"sync/atomic"

	"github.com/seed0cff8200/cardex/eval"
)

// The charts are SVG drawn here, inline in the page: no script, no
// library. Each has a title and a description for screen readers, and each
// page shows the same numbers in a table too. Every text that goes into an
// SVG is escaped by esc.

// palette is distinguishable for the common colour-vision deficiencies
// (Okabe–Ito); lines also differ by dash pattern and marker.
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"}
var dashes = []string{"", "6 3", "2 3", "8 3 2 3"}

func esc(s string) string { return html.EscapeString(s) }

type series struct {
	Name string
	Ys   []float64
}

func seriesOf(name string, ys []float64) series { return series{Name: name, Ys: ys} }

var chartID atomic.Int64

// nextID names a chart's title and description elements apart from the
// page's other charts.
func nextID(prefix string) string { return fmt.Sprintf("%s%d", prefix, chartID.Add(1)) }

// lineChart draws series over xs (positions by value) with y from 0 to yMax.
func lineChart(title, xLabel, yLabel string, xs []float64, ss []series, yMax float64) string {
	const w, h, left, right, top, bottom = 560.0, 300.0, 52.0, 170.0, 30.0, 44.0
	pw, ph := w-left-right, h-top-bottom
	id := nextID("chart")
	var b strings.Builder
	var desc []string
	for _, s := range ss {
		var pts []string
		for i, y := range s.Ys {
			if i < len(xs) {
				pts = append(pts, fmt.Sprintf("%s %.3f", trimFloat(xs[i]), y))
			}
		}
		desc = append(desc, s.Name+": "+strings.Join(pts, ", "))
	}
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-labelledby="%s-t %s-d" xmlns="http://www.w3.org/2000/svg">`, w, h, id, id)
	fmt.Fprintf(&b, `<title id="%s-t">%s</title><desc id="%s-d">%s (%s, %s)</desc>`, id, esc(title), id, esc(strings.Join(desc, "; ")), esc(xLabel), esc(yLabel))
	fmt.Fprintf(&b, `<text x="%.0f" y="18" class="chart-title">%s</text>`, left, esc(title))
	xmin, xmax := 0.0, 1.0
	if len(xs) > 0 {
		xmin, xmax = xs[0], xs[len(xs)-1]
		if xmax == xmin {
			xmax = xmin + 1
		}
	}
	px := func(x float64) float64 { return left + (x-xmin)/(xmax-xmin)*pw }
	py := func(y float64) float64 { return top + ph - math.Max(0, math.Min(y, yMax))/yMax*ph }
	for i := 0; i <= 4; i++ {
		y := yMax * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>`, left, py(y), left+pw, py(y))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="tick" text-anchor="end">%.2f</text>`, left-6, py(y)+4, y)
	}
	lastTick := math.Inf(-1)
	for _, x := range xs {
		if px(x)-lastTick < 28 { // a label would overlap the last one (the circles' titles still name every x)
			continue
		}
		lastTick = px(x)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%s</text>`, px(x), top+ph+16, esc(trimFloat(x)))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="axis" text-anchor="middle">%s</text>`, left+pw/2, h-6, esc(xLabel))
	fmt.Fprintf(&b, `<text x="14" y="%.1f" class="axis" text-anchor="middle" transform="rotate(-90 14 %.1f)">%s</text>`, top+ph/2, top+ph/2, esc(yLabel))
	for i, s := range ss {
		col, dash := palette[i%len(palette)], dashes[i%len(dashes)]
		var pts []string
		for j, y := range s.Ys {
			if j < len(xs) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(xs[j]), py(y)))
			}
		}
		dashAttr := ""
		if dash != "" {
			dashAttr = fmt.Sprintf(` stroke-dasharray="%s"`, dash)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2.5"%s/>`, strings.Join(pts, " "), col, dashAttr)
		for j, y := range s.Ys {
			if j < len(xs) {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s %s, %.3f</title></circle>`, px(xs[j]), py(y), col, esc(s.Name), esc(xLabel), esc(trimFloat(xs[j])), y)
			}
		}
		ly := top + 10 + float64(i)*20
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"%s/>`, left+pw+14, ly, left+pw+38, ly, col, dashAttr)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="legend">%s</text>`, left+pw+44, ly+4, esc(s.Name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func trimFloat(x float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", x), "0"), ".")
}

// missChart draws the misses a day as stacked bars, by kind.
func missChart(days []chartDay) string {
	const w, h, left, right, top, bottom = 760.0, 260.0, 44.0, 190.0, 30.0, 40.0
	pw, ph := w-left-right, h-top-bottom
	maxTotal := 1
	total := 0
	for _, d := range days {
		t := 0
		for _, n := range d.Counts {
			t += n
		}
		total += t
		maxTotal = max(maxTotal, t)
	}
	id := nextID("misses")
	var b strings.Builder
	title := "Misses a day, by kind"
	desc := fmt.Sprintf("%d misses over %d days, at most %d on one day; the table below has every day's numbers", total, len(days), maxTotal)
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-labelledby="%s-t %s-d" xmlns="http://www.w3.org/2000/svg">`, w, h, id, id)
	fmt.Fprintf(&b, `<title id="%s-t">%s</title><desc id="%s-d">%s</desc>`, id, esc(title), id, esc(desc))
	fmt.Fprintf(&b, `<text x="%.0f" y="18" class="chart-title">%s</text>`, left, esc(title))
	py := func(n float64) float64 { return top + ph - n/float64(maxTotal)*ph }
	for i := 0; i <= 4; i++ {
		v := float64(maxTotal) * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>`, left, py(v), left+pw, py(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="tick" text-anchor="end">%s</text>`, left-6, py(v)+4, trimFloat(v))
	}
	bw := pw / float64(max(1, len(days)))
	label := max(1, len(days)/8)
	for i, d := range days {
		x := left + float64(i)*bw
		acc := 0
		for k, n := range d.Counts {
			if n == 0 {
				continue
			}
			y0, y1 := py(float64(acc)), py(float64(acc+n))
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %d %s</title></rect>`,
				x+bw*0.1, y1, bw*0.8, y0-y1, palette[k%len(palette)], d.Day.Format("2006-01-02"), n, esc(missLabels[missKinds[k]]))
			acc += n
		}
		if i%label == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%s</text>`, x+bw/2, top+ph+16, d.Day.Format("01-02"))
		}
	}
	for k, kind := range missKinds {
		ly := top + 10 + float64(k)*20
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="14" height="14" fill="%s"/>`, left+pw+14, ly-10, palette[k%len(palette)])
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="legend">%s</text>`, left+pw+34, ly+2, esc(missLabels[kind]))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// tokenBar draws the shortlist's tokens against the whole authorized
// catalogue's.
func tokenBar(shortlist, catalog int64) string {
	const w, left, bar = 640.0, 150.0, 420.0
	id := nextID("tokens")
	den := float64(max(catalog, shortlist, 1))
	var b strings.Builder
	desc := fmt.Sprintf("the shortlist costs about %d tokens; the whole authorized catalogue would cost about %d", shortlist, catalog)
	fmt.Fprintf(&b, `<svg class="chart tokenbar" viewBox="0 0 %.0f 64" role="img" aria-labelledby="%s-t %s-d" xmlns="http://www.w3.org/2000/svg">`, w, id, id)
	fmt.Fprintf(&b, `<title id="%s-t">Token bar</title><desc id="%s-d">%s</desc>`, id, id, esc(desc))
	for i, row := range []struct {
		label string
		n     int64
		col   string
	}{{"shortlist", shortlist, palette[0]}, {"authorized catalogue", catalog, "#8a8a8a"}} {
		y := 6 + float64(i)*28
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" class="legend" text-anchor="end">%s</text>`, left-8, y+15, esc(row.label))
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.1f" height="20" fill="%s"/>`, left, y, math.Max(1, float64(row.n)/den*bar), row.col)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="legend">~%d</text>`, left+math.Max(1, float64(row.n)/den*bar)+6, y+15, row.n)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// tokenChart draws a report's shortlist costs against the whole catalogue.
func tokenChart(t *eval.TokenReport) string {
	const w, left, bar, rowH = 640.0, 150.0, 380.0, 28.0
	h := 30 + rowH*float64(len(t.Shortlists)+1)
	id := nextID("savings")
	den := float64(max(t.CatalogTokens, 1))
	var b strings.Builder
	var desc []string
	for _, s := range t.Shortlists {
		desc = append(desc, fmt.Sprintf("top %d: %.0f tokens (%.1f%% saved)", s.K, s.Tokens, 100*s.Saved))
	}
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-labelledby="%s-t %s-d" xmlns="http://www.w3.org/2000/svg">`, w, h, id, id)
	fmt.Fprintf(&b, `<title id="%s-t">Token savings</title><desc id="%s-d">whole catalogue %d tokens; %s</desc>`, id, id, t.CatalogTokens, esc(strings.Join(desc, "; ")))
	fmt.Fprintf(&b, `<text x="%.0f" y="18" class="chart-title">tokens a turn (%s)</text>`, left, esc(t.Encoding))
	rows := []struct {
		label string
		n     float64
		col   string
	}{{"whole catalogue", float64(t.CatalogTokens), "#8a8a8a"}}
	for i, s := range t.Shortlists {
		rows = append(rows, struct {
			label string
			n     float64
			col   string
		}{fmt.Sprintf("top %d shortlist", s.K), s.Tokens, palette[i%len(palette)]})
	}
	for i, row := range rows {
		y := 28 + float64(i)*rowH
		width := math.Max(1, row.n/den*bar)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" class="legend" text-anchor="end">%s</text>`, left-8, y+15, esc(row.label))
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.1f" height="20" fill="%s"/>`, left, y, width, row.col)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="legend">%.0f</text>`, left+width+6, y+15, row.n)
	}
	b.WriteString(`</svg>`)
	return b.String()
}
