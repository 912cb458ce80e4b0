# The file-based catalog of pipeline-operator, served over gRPC by opm. `make catalog-build`
# builds it offline: opm and grpc_health_probe are the static binaries the Makefile builds from
# the Go module proxy, so no base image is pulled.
FROM scratch
COPY opm grpc_health_probe /bin/
COPY catalog /configs
# opm serve takes a lock in its cache directory: the serving user owns it.
COPY --chown=65532:65532 cache /tmp/cache
USER 65532:65532
# Pre-build the serving cache so the catalog starts without rebuilding it.
RUN ["/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache", "--cache-only"]
EXPOSE 50051
ENTRYPOINT ["/bin/opm"]
CMD ["serve", "/configs", "--cache-dir=/tmp/cache"]
LABEL operators.operatorframework.io.index.configs.v1=/configs
