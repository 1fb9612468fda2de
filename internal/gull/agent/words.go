// Package agent is gull's command language: agent-browser's command lines
// (open, snapshot, click, fill, get, wait, screenshot, ...), split into words
// like a POSIX shell would (without running one), run one at a time against
// the sandbox's browser, answered as plain text with an exit code.
package agent

import (
	"errors"
	"strings"
)

// Split splits a command line into words with POSIX shell quoting: blanks
// separate words; '...' is literal; "..." keeps $, `, ", \ and newline
// escapable by a backslash; a backslash outside quotes escapes the next
// character (a backslash-newline disappears). Nothing is expanded.
func Split(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		inW   bool
	)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inW {
				words = append(words, cur.String())
				cur.Reset()
				inW = false
			}
		case c == '\\':
			inW = true
			if i+1 >= len(rs) {
				return nil, errors.New("unfinished escape at the end of the command")
			}
			i++
			if rs[i] != '\n' {
				cur.WriteRune(rs[i])
			}
		case c == '\'':
			inW = true
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				j++
			}
			if j >= len(rs) {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(string(rs[i+1 : j]))
			i = j
		case c == '"':
			inW = true
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				if rs[j] == '\\' && j+1 < len(rs) && strings.ContainsRune("$`\"\\\n", rs[j+1]) {
					j++
					if rs[j] != '\n' {
						cur.WriteRune(rs[j])
					}
					continue
				}
				cur.WriteRune(rs[j])
			}
			if j >= len(rs) {
				return nil, errors.New("unterminated double quote")
			}
			i = j
		default:
			inW = true
			cur.WriteRune(c)
		}
	}
	if inW {
		words = append(words, cur.String())
	}
	return words, nil
}
