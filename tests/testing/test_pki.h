// Real certificates for TLS tests, made with the openssl command line in a
// directory of the test's: a CA, a server certificate for 127.0.0.1 and
// localhost, client certificates with a given Common Name, and a second CA
// that backfilld does not trust. P-256 keys, valid for two days.
// Header-only; each call runs openssl and owns nothing after it returns.

#ifndef BACKFILL_TESTS_TESTING_TEST_PKI_H_
#define BACKFILL_TESTS_TESTING_TEST_PKI_H_

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace backfill::testing {

// The PEM text of `path` ("" when it cannot be read).
inline std::string ReadPem(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Makes, in `dir`: ca.pem/ca.key, server.pem/server.key (signed by ca,
// subjectAltName IP:127.0.0.1, DNS:localhost), and for each name N of
// `clients` N.pem/N.key (CN=N, client auth, signed by ca); other-ca.pem and
// stranger.pem/stranger.key (CN=olivia, signed by other-ca).
inline ::testing::AssertionResult MakeTestPki(
    const std::string& dir, const std::vector<std::string>& clients) {
  std::string script =
      "set -e\ncd '" + dir +
      "'\n"
      "key() { openssl genpkey -algorithm EC -pkeyopt "
      "ec_paramgen_curve:P-256 -out \"$1\"; }\n"
      "sign() {  # name cn ca ext\n"
      "  key \"$1.key\"\n"
      "  openssl req -new -key \"$1.key\" -out \"$1.csr\" -subj \"/CN=$2\"\n"
      "  printf '%b' \"$4\" > \"$1.ext\"\n"
      "  openssl x509 -req -in \"$1.csr\" -CA \"$3.pem\" -CAkey \"$3.key\" "
      "-CAcreateserial -out \"$1.pem\" -days 2 -extfile \"$1.ext\"\n"
      "}\n"
      "for ca in ca other-ca; do\n"
      "  key \"$ca.key\"\n"
      "  openssl req -x509 -new -key \"$ca.key\" -out \"$ca.pem\" "
      "-subj \"/CN=backfill test $ca\" -days 2\n"
      "done\n"
      "sign server localhost ca "
      "'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage="
      "serverAuth\\n'\n"
      "sign stranger olivia other-ca 'extendedKeyUsage=clientAuth\\n'\n";
  for (const std::string& name : clients) {
    script += "sign '" + name + "' '" + name +
              "' ca 'extendedKeyUsage=clientAuth\\n'\n";
  }
  const std::string path = dir + "/make-pki.sh";
  {
    std::ofstream out(path);
    out << script;
  }
  const std::string command =
      "bash '" + path + "' > '" + dir + "/make-pki.log' 2>&1";
  if (std::system(command.c_str()) != 0) {
    return ::testing::AssertionFailure() << "openssl failed:\n"
                                         << ReadPem(dir + "/make-pki.log");
  }
  return ::testing::AssertionSuccess();
}

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_TEST_PKI_H_
