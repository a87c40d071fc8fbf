# syntax=docker/dockerfile:1

# Build a static binary (no cgo).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/vera-proxy/vera/app.stamped=${VERSION}" -o /out/vera . \
 && mkdir -p /out/data/prompts /out/config

# Run it as a non-root user on a minimal base.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/vera /usr/local/bin/vera
# Named volumes mounted here start out owned by the nonroot user (65532).
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build --chown=65532:65532 /out/config /config
ENV VERA_LISTEN=0.0.0.0:11434 \
    VERA_DATA_DIR=/data \
    VERA_LOG_DIR=/data/logs \
    VERA_CONFIG_DIR=/config \
    VERA_PROMPTS_DIR=/data/prompts
VOLUME ["/data"]
EXPOSE 11434
USER nonroot:nonroot
HEALTHCHECK --interval=30s --timeout=6s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/vera", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/vera"]
CMD ["serve"]
