#include "server/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/text_file.h"

namespace backfill {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Bio = std::unique_ptr<BIO, BioFree>;

// The file named by `flag`; INVALID_ARGUMENT naming the flag when it cannot
// be read (a start-up option, not a missing resource).
absl::StatusOr<std::string> ReadAll(const char* flag, const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path, "the file");
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", text.status().message()));
  }
  return text;
}

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The PEM certificates in `pem`, counted; the first one in `*first`.
int CountCertificates(const std::string& pem,
                      std::unique_ptr<X509, X509Free>* first) {
  Bio bio = MemoryBio(pem);
  int count = 0;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    if (count == 0 && first != nullptr) {
      first->reset(cert);
    } else {
      X509_free(cert);
    }
    ++count;
  }
  ERR_clear_error();  // the end of the input reads as an error
  return count;
}

}  // namespace

absl::StatusOr<TlsFiles> LoadTlsFiles(const std::string& cert_path,
                                      const std::string& key_path,
                                      const std::string& client_ca_path) {
  TlsFiles files;
  absl::StatusOr<std::string> cert = ReadAll("--tls-cert", cert_path);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadAll("--tls-key", key_path);
  if (!key.ok()) return key.status();
  files.cert_chain = *std::move(cert);
  files.private_key = *std::move(key);

  std::unique_ptr<X509, X509Free> leaf;
  if (CountCertificates(files.cert_chain, &leaf) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-cert: ", cert_path,
        " holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
  }
  Bio key_bio = MemoryBio(files.private_key);
  std::unique_ptr<EVP_PKEY, KeyFree> pkey(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (pkey == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key: ", key_path,
        " holds no unencrypted PEM private key (-----BEGIN PRIVATE KEY-----)"));
  }
  if (X509_check_private_key(leaf.get(), pkey.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key: ", key_path,
                     " is not the key of the certificate in ", cert_path));
  }
  if (!client_ca_path.empty()) {
    absl::StatusOr<std::string> ca = ReadAll("--tls-client-ca", client_ca_path);
    if (!ca.ok()) return ca.status();
    files.client_ca = *std::move(ca);
    if (CountCertificates(files.client_ca, nullptr) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls-client-ca: ", client_ca_path,
          " holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
    }
  }
  return files;
}

}  // namespace backfill
