#include "tls_server.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace edgelock {
namespace test {

TestCerts::TestCerts() {
  char tmpl[] = "/tmp/edgelock-certs-XXXXXX";
  if (!mkdtemp(tmpl)) return;
  dir_ = tmpl;
  const std::string cmd = std::string("sh '") + EDGELOCK_CERTS_SCRIPT + "' '" + dir_ + "'";
  ok_ = std::system(cmd.c_str()) == 0;
}

TestCerts::~TestCerts() {
  if (dir_.empty()) return;
  const std::string cmd = "rm -rf '" + dir_ + "'";
  if (std::system(cmd.c_str()) != 0) {
    // Best effort clean-up of a temp dir.
  }
}

std::string TestCerts::read(const std::string& file) const {
  std::ifstream in(path(file), std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const TestCerts& shared_certs() {
  static const TestCerts certs;
  return certs;
}

std::vector<std::string> TlsRedis::args(const TestCerts& c, const std::string& cert, bool auth,
                                        int port, std::vector<std::string> extra) {
  std::vector<std::string> a = {"--tls-port",          std::to_string(port), "--tls-cert-file",
                                c.path(cert + ".crt"), "--tls-key-file",     c.path(cert + ".key"),
                                "--tls-ca-cert-file",  c.path("ca.crt"),     "--tls-auth-clients",
                                auth ? "yes" : "no"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TlsRedis::TlsRedis(const TestCerts& certs, const std::string& cert, bool auth_clients,
                   std::vector<std::string> extra)
    : tls_port_(free_port()),
      server_(args(certs, cert, auth_clients, tls_port_, std::move(extra))) {}

}  // namespace test
}  // namespace edgelock
