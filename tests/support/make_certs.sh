#!/bin/sh
# Generates the TLS test certificates into $1 (EC P-256, fast under qemu):
#   ca, other-ca          trust anchors (other-ca signs nothing we serve)
#   server                DNS:localhost + IP:127.0.0.1, valid now
#   dnsonly               DNS:localhost only (IP SAN mismatch)
#   expired, future       validity 2000-2001 and 2090-2091 (`openssl ca`
#                         sets both dates; OpenSSL 3.0 `x509` cannot)
#   client                client certificate for mutual TLS
#   rsa-server            like server, always with an RSA-2048 key
# EDGELOCK_TEST_KEY=rsa makes RSA-2048 keys instead (to measure that case).
set -eu
cd "$1"
key() {
  if [ "${EDGELOCK_TEST_KEY:-ec}" = rsa ] || [ "$1" = rsa-server ]; then
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1.key" 2>/dev/null
  else
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null
  fi
}
key ca
openssl req -x509 -new -key ca.key -subj /CN=edgelock-test-ca -days 3650 -out ca.crt
key other-ca
openssl req -x509 -new -key other-ca.key -subj /CN=other-ca -days 3650 -out other-ca.crt
mkdir -p db
: > db/index
echo 01 > db/serial
cat > ca.cnf <<'CNF'
[ca]
default_ca = edge
[edge]
database = db/index
serial = db/serial
new_certs_dir = db
certificate = ca.crt
private_key = ca.key
default_md = sha256
policy = anything
unique_subject = no
[anything]
commonName = supplied
[leaf]
subjectAltName = $ENV::SAN
basicConstraints = CA:FALSE
extendedKeyUsage = serverAuth, clientAuth
CNF
sign() {  # name san startdate enddate
  key "$1"
  openssl req -new -key "$1.key" -subj "/CN=$1" -out "$1.csr"
  SAN="$2" openssl ca -batch -notext -config ca.cnf -extensions leaf -in "$1.csr" -out "$1.crt" \
    -startdate "$3" -enddate "$4" 2>/dev/null
}
sign server "DNS:localhost,IP:127.0.0.1" 20200101000000Z 20900101000000Z
sign dnsonly "DNS:localhost" 20200101000000Z 20900101000000Z
sign expired "DNS:localhost,IP:127.0.0.1" 20000101000000Z 20010101000000Z
sign future "DNS:localhost,IP:127.0.0.1" 20900101000000Z 20910101000000Z
sign client "DNS:edgelock-client" 20200101000000Z 20900101000000Z
sign rsa-server "DNS:localhost,IP:127.0.0.1" 20200101000000Z 20900101000000Z
# SHA-256 of the server certificate's DER, for the pin tests.
openssl x509 -in server.crt -outform DER | openssl dgst -sha256 -binary > server.pin
