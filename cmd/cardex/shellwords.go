package main

import (
	"errors"
	"strings"
)

// splitCommand splits a command line the way a POSIX shell splits words:
// on unquoted blanks; 'single quotes' keep everything as it is; "double
// quotes" keep blanks and let a backslash escape ", \, $ and `; outside
// quotes a backslash escapes the next character. Nothing is expanded (no
// variables, globs or ~): the words go to the program as written.
func splitCommand(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated ' quote")
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New(`unterminated " quote`)
			}
		case c == '\\':
			inWord = true
			if i+1 >= len(s) {
				return nil, errors.New("a trailing backslash escapes nothing")
			}
			i++
			w.WriteByte(s[i])
		default:
			inWord = true
			w.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}
