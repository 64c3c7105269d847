package docs_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The marker convention of the tested examples (README.md, "Tested
// examples", says it for the pages' authors):
//
//   - a fenced block whose info string is "sh doctest" holds commands;
//   - "# " lines right after a command (no blank line between) are its
//     expected output ("#" alone is an empty line);
//   - a fenced block whose info string's first word is "output", right after
//     a doctest block, is the expected output of that block's last command;
//   - the last expected line may end in "(exit N)" after two spaces (or be
//     "(exit N)" alone): the exit status, 0 otherwise;
//   - <!-- doctest: serve FLAGS -->, <!-- doctest: run COMMAND -->,
//     <!-- doctest: database --> and <!-- doctest: eventually --> are
//     directives, on one line each; eventually marks the commands of the
//     next doctest block as reads of state that settles after a moment
//     (metrics gauges): each is run again until it prints what the page
//     says, for up to eventuallyFor.

// stepKind says what a step does.
type stepKind int

const (
	stepCommand  stepKind = iota // run a command, compare its output if documented
	stepServe                    // (re)start the page's server with flags
	stepDatabase                 // create a database and export DATABASE_URL
)

// step is one thing to do, in page order.
type step struct {
	line    int      // 1-based line of the command (or directive) in the page
	kind    stepKind //
	command string   // bash text (stepCommand), or the serve flags (stepServe)
	hidden  bool     // from a "run" directive: not shown on the page
	want    []string // expected output lines; nil: not compared
	exit    int      // expected exit status
	// eventually: run again until the output matches, for up to
	// eventuallyFor (an eventually directive before the block).
	eventually bool
}

var (
	directiveRE = regexp.MustCompile(`^<!--\s*doctest:\s*(\S+)\s*(.*?)\s*-->\s*$`)
	exitRE      = regexp.MustCompile(`^(?:(.*?) {2,})?\(exit (\d+)\)$`)
	heredocRE   = regexp.MustCompile(`<<-?\s*(?:'(\w+)'|"(\w+)"|(\w+))`)
)

// fence reports whether line opens or closes a fenced block, and its info
// string.
func fence(line string) (info string, ok bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || !strings.HasPrefix(t, "```") {
		return "", false
	}
	return strings.TrimSpace(strings.TrimLeft(t, "`")), true
}

// infoWords splits a fence's info string into words.
func infoWords(info string) []string { return strings.Fields(info) }

// parse reads a Markdown page and returns its steps. An error names the
// line of a marker that does not follow the convention.
func parse(page string) ([]step, error) {
	lines := strings.Split(page, "\n")
	var steps []step
	lastDoctestEnd := -1 // index of the closing fence of the last doctest block
	eventually := -1     // line of an eventually directive waiting for its block
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := directiveRE.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "serve":
				steps = append(steps, step{line: i + 1, kind: stepServe, command: m[2]})
			case "run":
				if m[2] == "" {
					return nil, fmt.Errorf("line %d: doctest run needs a command", i+1)
				}
				steps = append(steps, step{line: i + 1, kind: stepCommand, command: m[2], hidden: true})
			case "database":
				steps = append(steps, step{line: i + 1, kind: stepDatabase})
			case "eventually":
				eventually = i + 1
			default:
				return nil, fmt.Errorf("line %d: unknown doctest directive %q (serve, run, database, eventually)", i+1, m[1])
			}
			continue
		}
		if strings.Contains(line, "doctest:") && strings.HasPrefix(strings.TrimSpace(line), "<!--") {
			return nil, fmt.Errorf("line %d: a doctest directive is one line: <!-- doctest: NAME ARGS -->", i+1)
		}
		info, ok := fence(line)
		if !ok {
			continue
		}
		// A fenced block: find its end.
		end := i + 1
		for end < len(lines) {
			if _, ok := fence(lines[end]); ok {
				break
			}
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("line %d: fenced block not closed", i+1)
		}
		body := lines[i+1 : end]
		words := infoWords(info)
		switch {
		case len(words) >= 2 && words[1] == "doctest":
			if words[0] != "sh" {
				return nil, fmt.Errorf("line %d: a doctest block is tagged \"sh doctest\"", i+1)
			}
			cmds, err := parseCommands(body, i+2)
			if err != nil {
				return nil, err
			}
			if len(cmds) == 0 {
				return nil, fmt.Errorf("line %d: doctest block without a command", i+1)
			}
			for j := range cmds {
				cmds[j].eventually = eventually > 0
			}
			eventually = -1
			steps = append(steps, cmds...)
			lastDoctestEnd = end
		case len(words) >= 1 && words[0] == "output":
			if lastDoctestEnd < 0 || !onlyBlank(lines[lastDoctestEnd+1:i]) {
				return nil, fmt.Errorf("line %d: an output block follows a doctest block (only blank lines between)", i+1)
			}
			last := &steps[len(steps)-1]
			if last.want != nil {
				return nil, fmt.Errorf("line %d: the command of line %d already has its output in # lines", i+1, last.line)
			}
			want, exit, err := expected(body)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", i+1, err)
			}
			last.want, last.exit = want, exit
			lastDoctestEnd = -1
		}
		i = end
	}
	if eventually > 0 {
		return nil, fmt.Errorf("line %d: an eventually directive comes before a doctest block", eventually)
	}
	return steps, nil
}

func onlyBlank(lines []string) bool {
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			return false
		}
	}
	return true
}

// parseCommands splits a doctest block's lines (the first at page line
// first) into commands with their "# " expected output.
func parseCommands(body []string, first int) ([]step, error) {
	var steps []step
	var out []string // "# " lines of the current command
	collecting := false
	flush := func() error {
		if len(steps) == 0 || out == nil {
			return nil
		}
		want, exit, err := expected(out)
		if err != nil {
			return fmt.Errorf("line %d: %v", steps[len(steps)-1].line, err)
		}
		steps[len(steps)-1].want, steps[len(steps)-1].exit = want, exit
		out = nil
		return nil
	}
	for i := 0; i < len(body); i++ {
		line := body[i]
		switch {
		case strings.TrimSpace(line) == "":
			collecting = false
		case line == "#" || strings.HasPrefix(line, "# "):
			if collecting {
				out = append(out, strings.TrimPrefix(strings.TrimPrefix(line, "#"), " "))
			}
			// A comment before any command, or after a blank line, is a comment.
		default:
			if err := flush(); err != nil {
				return nil, err
			}
			start := i
			cmd := []string{line}
			// Continuation lines and here-documents belong to the command.
			for strings.HasSuffix(cmd[len(cmd)-1], `\`) && i+1 < len(body) {
				i++
				cmd = append(cmd, body[i])
			}
			if m := heredocRE.FindStringSubmatch(strings.Join(cmd, "\n")); m != nil {
				term := m[1] + m[2] + m[3]
				for i+1 < len(body) {
					i++
					cmd = append(cmd, body[i])
					if strings.TrimLeft(body[i], "\t") == term {
						break
					}
				}
			}
			steps = append(steps, step{line: first + start, kind: stepCommand, command: strings.Join(cmd, "\n")})
			collecting = true
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return steps, nil
}

// expected reads the expected output lines: the exit status from the last
// line, trailing blank lines dropped.
func expected(lines []string) (want []string, exit int, err error) {
	want = append([]string{}, lines...)
	for len(want) > 0 && strings.TrimSpace(want[len(want)-1]) == "" {
		want = want[:len(want)-1]
	}
	if len(want) > 0 {
		last := strings.TrimRight(want[len(want)-1], " ")
		if m := exitRE.FindStringSubmatch(last); m != nil {
			if exit, err = strconv.Atoi(m[2]); err != nil {
				return nil, 0, err
			}
			if m[1] == "" {
				want = want[:len(want)-1]
			} else {
				want[len(want)-1] = m[1]
			}
		}
	}
	if want == nil {
		want = []string{}
	}
	return want, exit, nil
}
