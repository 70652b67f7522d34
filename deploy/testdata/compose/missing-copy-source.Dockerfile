FROM scratch
COPY no-such-dir /app
