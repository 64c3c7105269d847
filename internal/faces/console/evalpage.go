package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/eval"
)

// MaxReportBytes bounds a report file or upload.
const MaxReportBytes = 16 << 20

type evalData struct {
	Dir      string
	Reports  []string
	Selected string
	Uploaded string
	Report   *eval.Report
	// Recall are the recall@K charts, one per condition, of the "all" subset.
	Recall []evalChart
	// Abstention charts, one per condition.
	Abstention []evalChart
	Tokens     string
}

type evalChart struct {
	Condition string
	SVG       string
}

// reportFiles lists the dir's *.json files.
func reportFiles(dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

func (c *Console) evalPage(w http.ResponseWriter, r *http.Request, s *session) {
	d := evalData{Dir: c.cfg.EvalDir}
	files, err := reportFiles(c.cfg.EvalDir)
	if err != nil {
		c.fail(w, r, "Evaluation", fmt.Errorf("--console-eval-dir: %w", err))
		return
	}
	d.Reports = files
	d.Selected = r.URL.Query().Get("report")
	if d.Selected == "" && len(files) > 0 {
		d.Selected = files[len(files)-1]
	}
	p := page{Title: "Evaluation", Nav: "eval", Session: s, Data: &d}
	if d.Selected != "" {
		if !slices.Contains(files, d.Selected) {
			c.fail(w, r, "Evaluation", fmt.Errorf("report %q: %w (the reports are the *.json files of --console-eval-dir)", d.Selected, cards.ErrNotFound))
			return
		}
		b, err := readBounded(filepath.Join(c.cfg.EvalDir, d.Selected))
		if err == nil {
			err = d.load(b)
		}
		if err != nil {
			st, msg := httpStatus(w, c.log, err)
			p.Error = d.Selected + ": " + msg
			c.render(w, r, st, "eval", p)
			return
		}
	}
	c.render(w, r, 0, "eval", p)
}

// evalUpload shows an uploaded report; nothing is stored.
func (c *Console) evalUpload(w http.ResponseWriter, r *http.Request, s *session) {
	d := evalData{Dir: c.cfg.EvalDir}
	d.Reports, _ = reportFiles(c.cfg.EvalDir)
	p := page{Title: "Evaluation", Nav: "eval", Session: s, Data: &d}
	r.Body = http.MaxBytesReader(w, r.Body, MaxReportBytes+1<<20)
	f, hdr, err := r.FormFile("report")
	if err != nil {
		p.Error = "report: choose a report file (the JSON that cardex eval writes, at most 16 MiB)"
		c.render(w, r, http.StatusBadRequest, "eval", p)
		return
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxReportBytes+1))
	if err == nil && len(b) > MaxReportBytes {
		err = cards.Invalid("report", "is over %d bytes", MaxReportBytes)
	}
	if err == nil {
		err = d.load(b)
	}
	if err != nil {
		st, msg := httpStatus(w, c.log, err)
		p.Error = msg
		c.render(w, r, st, "eval", p)
		return
	}
	d.Uploaded = filepath.Base(hdr.Filename)
	c.render(w, r, 0, "eval", p)
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxReportBytes+1))
	if err == nil && len(b) > MaxReportBytes {
		return nil, cards.Invalid("report", "is over %d bytes", MaxReportBytes)
	}
	return b, err
}

// load parses a report and draws its charts.
func (d *evalData) load(b []byte) error {
	var rep eval.Report
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&rep); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		if errors.As(err, &se) || errors.As(err, &te) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return cards.Invalid("report", "is not a cardex eval report (JSON): %v", err)
		}
		return err
	}
	if rep.Dataset == "" || len(rep.Modes) == 0 {
		return cards.Invalid("report", "is not a cardex eval report: it names no dataset or modes (write one with cardex eval DIR --out FILE)")
	}
	d.Report = &rep
	if all := rep.Subset("all"); all != nil {
		conds := rep.Conditions
		if len(conds) == 0 {
			conds = []string{""}
		}
		for _, cond := range conds {
			var series []series
			for _, m := range all.Modes {
				if m.Condition == cond || (cond == "" && m.Condition == "") {
					series = append(series, seriesOf(m.Mode, []float64{m.Recall1, m.Recall3, m.Recall5, m.Recall10}))
				}
			}
			title := "recall@K by mode"
			if cond != "" {
				title += ", given " + cond
			}
			d.Recall = append(d.Recall, evalChart{Condition: cond, SVG: lineChart(title, "K", "recall", []float64{1, 3, 5, 10}, series, 1)})
		}
	}
	for _, a := range rep.Abstention {
		var xs, prec, rec, in5 []float64
		for _, row := range a.Rows {
			xs = append(xs, row.Threshold)
			prec, rec, in5 = append(prec, row.Precision), append(rec, row.Recall), append(in5, row.InRecall5)
		}
		d.Abstention = append(d.Abstention, evalChart{Condition: a.Condition, SVG: lineChart("abstention by min_confidence, given "+a.Condition, "min confidence", "share",
			xs, []series{seriesOf("abstention precision", prec), seriesOf("abstention recall", rec), seriesOf("in-catalogue recall@5", in5)}, 1)})
	}
	if t := rep.Tokens; t != nil {
		d.Tokens = tokenChart(t)
	}
	return nil
}
