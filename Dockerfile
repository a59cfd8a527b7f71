# syntax=docker/dockerfile:1
# One static image for the edge (iop gateway), the node agent (iop node)
# and the embedded default (iop dev):
#   docker build -t iop .
#   docker run -p 8080:8080 iop                     # iop dev
#   docker run iop gateway --config /etc/iop/gateway.yaml

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/iop ./cmd/iop

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/iop /usr/local/bin/iop
USER nonroot:nonroot
# 8080: the API. 9090 (node link) and 8081 (admin) are for `iop gateway`
# configs that listen on them; the admin listener off loopback needs
# admin.token_sha256. The default command (iop dev) keeps admin on the
# container's loopback.
EXPOSE 8080 9090
ENTRYPOINT ["iop"]
CMD ["dev", "--listen", "0.0.0.0:8080"]
