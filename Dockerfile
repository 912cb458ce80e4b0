# Build the manager binary and the pipeline router (cmd/router), which ships in the same image.
FROM docker.io/library/golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
# The release the binaries say they are (make docker-build passes $(VERSION)).
ARG VERSION=devel

WORKDIR /workspace
# Download the modules first so that this layer stays cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download

COPY cmd/ cmd/
COPY api/ api/
COPY internal/ internal/

# GOARCH is left to the platform of the build when TARGETARCH is empty.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w -X github.com/ndsl-cn/pipeline-operator/internal/version.Version=${VERSION}" -o manager ./cmd && \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w -X github.com/ndsl-cn/pipeline-operator/internal/version.Version=${VERSION}" -o router ./cmd/router

# Ship the static binaries in a minimal, non-root base image.
FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/manager .
COPY --from=builder /workspace/router .
USER 65532:65532

ENTRYPOINT ["/manager"]
