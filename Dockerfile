# tracker's OCI image: the same `tracker` entry points as the systemd units (/opt/tracker/.venv),
# run as a non-root user. Its build steps are the Makefile's own `image-rootfs` target (tested
# without a container engine by tests/ops/test_image.py); deploy/compose.yaml runs PostgreSQL,
# N poll workers and the API from it.
#   docker build -t tracker .        (or: podman build -t tracker .)
FROM python:3.11-slim AS build
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md Makefile watchlist.yaml ./
COPY tracker ./tracker
RUN make image-rootfs IMAGE_PREFIX=/opt/tracker

FROM python:3.11-slim
RUN groupadd --system --gid 10001 tracker \
    && useradd --system --uid 10001 --gid tracker --home-dir /var/lib/tracker --create-home tracker \
    && install -d -o root -g root -m 0755 /etc/tracker
COPY --from=build /opt/tracker /opt/tracker
COPY --from=build /opt/tracker/watchlist.yaml /etc/tracker/watchlist.yaml
ENV PATH=/opt/tracker/.venv/bin:$PATH \
    TRACKER_STATE_DIR=/var/lib/tracker \
    TRACKER_WATCHLIST=/etc/tracker/watchlist.yaml \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /var/lib/tracker
EXPOSE 8080
# SIGTERM hands the analysis under way back; give it the stop time the units give (120 s)
STOPSIGNAL SIGTERM
ENTRYPOINT ["tracker"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
