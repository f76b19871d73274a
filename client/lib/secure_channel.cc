#include "client/lib/secure_channel.h"

#include <fcntl.h>
#include <grpcpp/support/client_interceptor.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace perld::client {
namespace {

// Reads at most `limit` bytes of `path`; `secret` also refuses a file that
// grants anything to others. Errors name the file and `what`, never content.
absl::StatusOr<std::string> ReadLimited(const std::string& path, const std::string& what,
                                        size_t limit, bool secret) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no file named"));
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path, ": cannot open"));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct stat st = {};
  if (fstat(fd, &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path, ": cannot stat"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": not a regular file"));
  }
  if (secret && (st.st_mode & 0007) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s %s: mode %04o grants access to others; a secret file must not (chmod o-rwx %s)", what,
        path, st.st_mode & 07777, path));
  }
  if (static_cast<uint64_t>(st.st_size) > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": larger than ", limit, " bytes"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path, ": cannot read"));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

// Adds "authorization: Bearer <token>" to every call's initial metadata.
class BearerInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

class BearerFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerFactory(const std::string& token) : header_(absl::StrCat("Bearer ", token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new BearerInterceptor(&header_);
  }

 private:
  const std::string header_;  // lives as long as the channel holding this factory
};

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what) {
  return ReadLimited(path, what, kMaxSecretFileBytes, /*secret=*/true);
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& what) {
  return ReadLimited(path, what, kMaxPemFileBytes, /*secret=*/false);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& what) {
  absl::StatusOr<std::string> text = ReadSecretFile(path, what);
  if (!text.ok()) return text.status();
  const std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": the file holds no token"));
  }
  for (const char c : token) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", path, ": a token is one word of printable ASCII (no spaces, no line breaks)"));
    }
  }
  return token;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const std::string& target,
                                                           const ChannelSecurity& security) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (security.UsesTls()) {
    grpc::SslCredentialsOptions options;
    if (!security.ca_file.empty()) {
      absl::StatusOr<std::string> roots = ReadPemFile(security.ca_file, "CA file");
      if (!roots.ok()) return roots.status();
      options.pem_root_certs = std::move(*roots);
    }
    if (security.cert_file.empty() != security.key_file.empty()) {
      return absl::InvalidArgumentError(
          "a client certificate needs both a certificate file and a key file");
    }
    if (!security.cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadPemFile(security.cert_file, "certificate file");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadSecretFile(security.key_file, "key file");
      if (!key.ok()) return key.status();
      options.pem_cert_chain = std::move(*cert);
      options.pem_private_key = std::move(*key);
    }
    credentials = grpc::SslCredentials(options);
  } else {
    if (!security.key_file.empty()) {
      return absl::InvalidArgumentError("a client key file is only used with TLS");
    }
    credentials = grpc::InsecureChannelCredentials();
  }
  if (security.token_file.empty()) return grpc::CreateChannel(target, credentials);
  absl::StatusOr<std::string> token = ReadTokenFile(security.token_file, "token file");
  if (!token.ok()) return token.status();
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<BearerFactory>(*token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      target, credentials, grpc::ChannelArguments(), std::move(factories));
}

}  // namespace perld::client
