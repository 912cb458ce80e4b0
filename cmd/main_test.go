package main

import (
	"flag"
	"io"
	"slices"
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

// The client certificate flags as config/overlays/webhook-client-certificate and the chart's
// webhookClients write them: a CA file and a comma-separated list of names.
func TestWebhookClientFlags(t *testing.T) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var w webhookFlags
	w.bind(fs)
	if err := fs.Parse([]string{"--webhook-client-ca-file=/etc/pipeline-operator/webhook-clients/ca.crt",
		"--webhook-client-names=kube-apiserver-webhook-client, apiserver.example,,"}); err != nil {
		t.Fatal(err)
	}
	if w.ClientCAFile != "/etc/pipeline-operator/webhook-clients/ca.crt" {
		t.Errorf("CA file %q", w.ClientCAFile)
	}
	if want := []string{"kube-apiserver-webhook-client", "apiserver.example"}; !slices.Equal(w.ClientNames, want) {
		t.Errorf("names %q, want %q", w.ClientNames, want)
	}
}
