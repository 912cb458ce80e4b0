package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// fromLine matches a Dockerfile's FROM instruction: its start (with flags such as --platform),
// the image and the rest of the line (" AS name", a carriage return).
var fromLine = regexp.MustCompile(`^(?i)(\s*FROM\s+(?:--\S+\s+)*)(\S+)(.*)$`)

// stageName matches the " AS name" of a FROM line.
var stageName = regexp.MustCompile(`(?i)^\s+AS\s+(\S+)`)

// pinFiles rewrites the FROM lines of the Dockerfiles at paths so that each names its base image
// by tag and digest ("golang:1.26@sha256:…"), the digest being the one the tag points at now (an
// earlier digest is replaced). It leaves every other byte alone, and FROM lines naming scratch,
// an earlier stage or a build argument. It resolves every image before it writes anything.
func pinFiles(ctx context.Context, r *resolver, paths []string, out io.Writer) error {
	contents := make([][]byte, len(paths))
	digests := map[string]string{}
	for i, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading the Dockerfile: %w", err)
		}
		contents[i] = b
		for _, image := range baseImages(string(b)) {
			if _, ok := digests[image]; ok {
				continue
			}
			d, err := r.digest(ctx, image)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			digests[image] = d
		}
	}
	for i, path := range paths {
		pinned := pin(string(contents[i]), digests)
		if pinned == string(contents[i]) {
			continue
		}
		info, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("writing the pinned Dockerfile: %w", err)
		}
		if err := os.WriteFile(path, []byte(pinned), info.Mode().Perm()); err != nil {
			return fmt.Errorf("writing the pinned Dockerfile: %w", err)
		}
		if _, err := fmt.Fprintf(out, "%s: base images pinned\n", path); err != nil {
			return err
		}
	}
	return nil
}

// baseImages returns the base images that the FROM lines of dockerfile name, without digests.
func baseImages(dockerfile string) []string {
	var images []string
	eachFrom(dockerfile, func(image string) string {
		images = append(images, withoutDigest(image))
		return image
	})
	return images
}

// pin returns dockerfile with the base image of each FROM line followed by its digest in
// digests (keyed by the image without digest).
func pin(dockerfile string, digests map[string]string) string {
	return eachFrom(dockerfile, func(image string) string {
		base := withoutDigest(image)
		if d, ok := digests[base]; ok {
			return base + "@" + d
		}
		return image
	})
}

// eachFrom calls f with the image of every FROM line of dockerfile that names a base image from
// a registry, and returns dockerfile with each such image replaced by what f returns.
func eachFrom(dockerfile string, f func(image string) string) string {
	lines := strings.SplitAfter(dockerfile, "\n")
	stages := map[string]bool{}
	for i, line := range lines {
		body := strings.TrimSuffix(line, "\n")
		m := fromLine.FindStringSubmatch(body)
		if m == nil {
			continue
		}
		start, image, rest := m[1], m[2], m[3]
		fromRegistry := !strings.EqualFold(image, "scratch") && !strings.Contains(image, "$") &&
			!stages[strings.ToLower(image)]
		if s := stageName.FindStringSubmatch(rest); s != nil {
			stages[strings.ToLower(s[1])] = true
		}
		if fromRegistry {
			lines[i] = start + f(image) + rest + line[len(body):]
		}
	}
	return strings.Join(lines, "")
}
