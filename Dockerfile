# svrpd as a container image: a static binary on a base with nothing else in it, run as an
# unprivileged user, its data in a volume.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t svrpd .
#   docker run -d --stop-timeout 45 --name svrpd -p 8080:8080 -v svrpd-data:/data svrpd
#
# --stop-timeout: docker stop sends SIGTERM and, by default, SIGKILL 10 s later, while svrpd
# gives a shutdown up to --shutdown-timeout (30 s) to drain requests and close its store; 45 s
# leaves it that whole budget, as the systemd unit's TimeoutStopSec does. (Compose:
# stop_grace_period: 45s.)
#
# Every flag of svrpd serve can be given as an argument or as an SVRPD_ variable
# (docker run -e SVRPD_POSTGRES=postgres://...). On the internet, with ACME:
#
#   docker run -d --stop-timeout 45 -p 443:8443 -p 80:8080 -v svrpd-data:/data \
#     -e SVRPD_LISTEN=:8443 -e SVRPD_HTTP_REDIRECT=:8080 \
#     -e SVRPD_ACME_DOMAIN=registry.example.net -e SVRPD_ACME_EMAIL=ops@example.net svrpd

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.buildVersion=${VERSION}" -o /out/svrpd ./svrpd \
	&& mkdir /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/svrpd /usr/local/bin/svrpd
# The volume's mount point belongs to the user the daemon runs as, so that a new named
# volume starts writable by it.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
# The data directory is --data's default, ./svrpd-data, in the volume: not SVRPD_DATA,
# which -e SVRPD_POSTGRES=... would contradict.
WORKDIR /data
ENV SVRPD_LISTEN=:8080 \
	SVRPD_METRICS_LISTEN=:9100
VOLUME /data
EXPOSE 8080 9100
# /health answers from memory, so it says whether the process serves; /ready, for a load
# balancer, says whether the store takes writes.
HEALTHCHECK --interval=30s --timeout=6s --start-period=60s --retries=3 \
	CMD ["/usr/local/bin/svrpd", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/svrpd"]
CMD ["serve"]
