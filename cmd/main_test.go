package main

import (
	"flag"
	"io"
	"testing"
)

// TestEnableWebhooks checks how --enable-webhooks and ENABLE_WEBHOOKS decide whether the
// webhooks are served: on by default, the variable when the flag is absent, the flag over it.
func TestEnableWebhooks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    bool
		wantErr bool
	}{
		{name: "default", want: true},
		{name: "flag off", args: []string{"--enable-webhooks=false"}, want: false},
		{name: "variable off", env: map[string]string{"ENABLE_WEBHOOKS": "false"}, want: false},
		{name: "variable off, as 0", env: map[string]string{"ENABLE_WEBHOOKS": "0"}, want: false},
		{name: "variable on", env: map[string]string{"ENABLE_WEBHOOKS": "true"}, want: true},
		{name: "variable empty", env: map[string]string{"ENABLE_WEBHOOKS": ""}, want: true},
		{name: "flag on wins over the variable", args: []string{"--enable-webhooks"}, env: map[string]string{"ENABLE_WEBHOOKS": "false"}, want: true},
		{name: "flag off wins over the variable", args: []string{"--enable-webhooks=false"}, env: map[string]string{"ENABLE_WEBHOOKS": "true"}, want: false},
		{name: "variable neither true nor false", env: map[string]string{"ENABLE_WEBHOOKS": "no-thanks"}, wantErr: true},
		{name: "a bad variable does not matter under the flag", args: []string{"--enable-webhooks=false"}, env: map[string]string{"ENABLE_WEBHOOKS": "no-thanks"}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("manager", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var w webhookFlags
			w.bind(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := w.applyEnv(fs, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.wantErr {
				if err == nil {
					t.Fatalf("no error for ENABLE_WEBHOOKS=%q", tc.env["ENABLE_WEBHOOKS"])
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.Enabled != tc.want {
				t.Errorf("webhooks enabled = %v, want %v", w.Enabled, tc.want)
			}
		})
	}
}
