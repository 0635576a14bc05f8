# The polpo daemon in a container: missions in a volume, state (SQLite, events.jsonl, workspaces) in another.
#   docker build -t polpo .
#   docker run -d --name polpo -e POLPO_HTTP_TOKEN=change-me -p 8765:8765 \
#       -v "$PWD/missions:/srv/polpo/missions" -v polpo-state:/srv/polpo/state polpo
# Mount your own config over /etc/polpo/polpo.toml to add agents, a judge or a PostgreSQL store
# (the image has the `postgres` and `otel` extras).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True
RUN apt-get update && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /srv/polpo polpo

WORKDIR /opt/polpo
COPY requirements.lock pyproject.toml README.md ./
RUN python -m venv /opt/polpo/.venv && /opt/polpo/.venv/bin/pip install --no-cache-dir -r requirements.lock
COPY polpo ./polpo
RUN /opt/polpo/.venv/bin/pip install --no-cache-dir --no-deps ".[postgres,otel]" \
    && /opt/polpo/.venv/bin/pip install --no-cache-dir "asyncpg==0.32.0" \
       "opentelemetry-sdk==1.45.2" "opentelemetry-exporter-otlp-proto-http==1.45.2"
COPY docs/docker-polpo.toml /etc/polpo/polpo.toml

ENV PATH=/opt/polpo/.venv/bin:$PATH
RUN mkdir -p /srv/polpo/missions /srv/polpo/state && chown -R polpo:polpo /srv/polpo
USER polpo
VOLUME ["/srv/polpo/missions", "/srv/polpo/state"]
EXPOSE 8765
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=4).status != 200)"
CMD ["polpo", "daemon", "--config", "/etc/polpo/polpo.toml"]
