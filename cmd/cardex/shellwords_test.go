package main

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "npx -y @modelcontextprotocol/server-filesystem /srv/files", want: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/files"}},
		{in: `server --root "/srv/my files" --name 'a "quoted" name'`, want: []string{"server", "--root", "/srv/my files", "--name", `a "quoted" name`}},
		{in: `/opt/My\ Tools/server  --x=""  tail`, want: []string{"/opt/My Tools/server", "--x=", "tail"}},
		{in: `run "a \"b\" \\ \$HOME \n"`, want: []string{"run", `a "b" \ $HOME \n`}},
		{in: `pre'fix'"ed" $HOME ~`, want: []string{"prefixed", "$HOME", "~"}},
		{in: "   ", want: nil},
		{in: `echo "open`, wantErr: "unterminated \""},
		{in: `echo 'open`, wantErr: "unterminated '"},
		{in: `echo \`, wantErr: "trailing backslash"},
	} {
		got, err := splitCommand(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q (%v), want %q", tc.in, got, err, tc.want)
		}
	}
}
