// Command imagedigest names container images by digest: it asks an image's registry for the
// digest of the manifest a tag points at (the index of a multi-platform image), so that whoever
// moves the tag later changes nothing that names the image this way.
//
//	imagedigest IMAGE          print IMAGE's repository @ its digest (no tag): the manager image of
//	                           make bundle and make deploy with IMAGE_DIGESTS=true
//	imagedigest -pin FILE...   rewrite the FROM lines of Dockerfiles to tag@digest (make pin-base-images)
//
// It asks registries over HTTPS, with the credentials of the Docker configuration
// (~/.docker/config.json, $DOCKER_CONFIG); plain HTTP only to a registry on a loopback address.
// When an image cannot be resolved it fails, naming the image, and writes nothing.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "imagedigest:", err)
		os.Exit(1)
	}
}

// run is the command with its arguments (without the program name).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("imagedigest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		// Nothing is left to report when the usage cannot be written either.
		_, _ = fmt.Fprint(stderr, "usage: imagedigest [-timeout D] IMAGE\n       imagedigest [-timeout D] -pin DOCKERFILE...\n")
		fs.PrintDefaults()
	}
	pin := fs.Bool("pin", false, "Rewrite the FROM lines of the Dockerfiles named as arguments to tag@digest.")
	timeout := fs.Duration("timeout", time.Minute, "How long to wait for the registries in all.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	r := newResolver()

	if *pin {
		if fs.NArg() == 0 {
			fs.Usage()
			return errors.New("-pin needs at least one Dockerfile")
		}
		return pinFiles(ctx, r, fs.Args(), stdout)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want one image, got %d arguments", fs.NArg())
	}
	image := fs.Arg(0)
	digest, err := r.digest(ctx, image)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s@%s\n", repository(image), digest)
	return err
}
