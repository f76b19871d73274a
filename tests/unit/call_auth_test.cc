// CallAuth and the secret-file rules (README "Security"): which token may do
// what, how a header is read, and which token files are refused.
#include "daemon/service/call_auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/lib/secure_channel.h"
#include "daemon/common/secret_file.h"
#include "perld/v1/perld.grpc.pb.h"

namespace perld::service {
namespace {

class TempFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/call_auth_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    for (const std::string& f : files_) std::remove(f.c_str());
    rmdir(dir_.c_str());
  }
  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    files_.push_back(path);
    return path;
  }
  std::string dir_;
  std::vector<std::string> files_;
};

using SecretFileTest = TempFiles;
using CallAuthTest = TempFiles;

TEST_F(SecretFileTest, TokenIsTheTrimmedWord) {
  const std::string path = Write("t", "  s3cr3t-Token_1\n\n", 0600);
  absl::StatusOr<std::string> token = common::ReadTokenFile(path, "token");
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cr3t-Token_1");
  EXPECT_TRUE(common::ReadTokenFile(Write("g", "abc\n", 0640), "token").ok());  // group may read
}

TEST_F(SecretFileTest, RefusesFilesOthersCanAccessWithoutShowingTheirContent) {
  for (const mode_t mode : {0644, 0604, 0602, 0601, 0666}) {
    const std::string path = Write("open" + std::to_string(mode), "topsecretvalue\n", mode);
    absl::StatusOr<std::string> token = common::ReadTokenFile(path, "auth.ingestTokenFile");
    ASSERT_FALSE(token.ok()) << mode;
    EXPECT_EQ(token.status().code(), absl::StatusCode::kPermissionDenied);
    const std::string message(token.status().message());
    EXPECT_NE(message.find("auth.ingestTokenFile"), std::string::npos) << message;
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("grants access to others"), std::string::npos) << message;
    EXPECT_EQ(message.find("topsecret"), std::string::npos) << message;
  }
}

TEST_F(SecretFileTest, RefusesEmptyBadAndMissingTokens) {
  EXPECT_FALSE(common::ReadTokenFile(Write("empty", " \n", 0600), "t").ok());
  EXPECT_FALSE(common::ReadTokenFile(Write("two", "one two\n", 0600), "t").ok());
  EXPECT_FALSE(common::ReadTokenFile(Write("ctl", "a\x01z\n", 0600), "t").ok());
  EXPECT_FALSE(common::ReadTokenFile(dir_ + "/missing", "t").ok());
  EXPECT_FALSE(common::ReadTokenFile(dir_, "t").ok());  // a directory
  EXPECT_FALSE(common::ReadTokenFile(
                   Write("big", std::string(common::kMaxSecretFileBytes + 1, 'a'), 0600), "t")
                   .ok());
  // A public PEM file may be world-readable.
  EXPECT_TRUE(common::ReadPemFile(Write("ca", "-----BEGIN CERTIFICATE-----\n", 0644), "ca").ok());
}

TEST_F(CallAuthTest, OffAllowsEverything) {
  absl::StatusOr<std::unique_ptr<CallAuth>> auth = CallAuth::Create(config::AuthConfig{});
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_FALSE((*auth)->enabled());
  for (const Access a : {Access::kRead, Access::kWrite, Access::kSbp}) {
    EXPECT_EQ((*auth)->Check("", a), AuthVerdict::kAllowed);
  }
}

TEST_F(CallAuthTest, IngestTokenDoesEverythingQueryTokenOnlyReads) {
  config::AuthConfig config;
  config.ingest_token_file = Write("ingest", "ingest-token\n", 0600);
  config.query_token_file = Write("query", "query-token\n", 0400);
  absl::StatusOr<std::unique_ptr<CallAuth>> created = CallAuth::Create(config);
  ASSERT_TRUE(created.ok()) << created.status();
  const CallAuth& auth = **created;
  EXPECT_TRUE(auth.enabled());
  for (const Access a : {Access::kRead, Access::kWrite, Access::kSbp}) {
    EXPECT_EQ(auth.Check("Bearer ingest-token", a), AuthVerdict::kAllowed);
    EXPECT_EQ(auth.Check("bearer ingest-token", a), AuthVerdict::kAllowed);  // scheme: any case
  }
  EXPECT_EQ(auth.Check("Bearer query-token", Access::kRead), AuthVerdict::kAllowed);
  EXPECT_EQ(auth.Check("Bearer query-token", Access::kWrite), AuthVerdict::kPermissionDenied);
  EXPECT_EQ(auth.Check("Bearer query-token", Access::kSbp), AuthVerdict::kPermissionDenied);
  EXPECT_EQ(auth.permission_denied(), 2u);
  for (const char* bad :
       {"", "Bearer", "Bearer ", "ingest-token", "Basic ingest-token", "Bearer ingest-token ",
        "Bearer ingest-tokeN", "Bearer ingest-token2", "Bearer query"}) {
    EXPECT_EQ(auth.Check(bad, Access::kRead), AuthVerdict::kUnauthenticated) << bad;
  }
  EXPECT_EQ(auth.unauthenticated(), 9u);
}

TEST_F(CallAuthTest, SbpOpenOpensOnlySbp) {
  config::AuthConfig config;
  config.ingest_token_file = Write("ingest", "ingest-token\n", 0600);
  config.sbp_open = true;
  absl::StatusOr<std::unique_ptr<CallAuth>> auth = CallAuth::Create(config);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ((*auth)->Check("", Access::kSbp), AuthVerdict::kAllowed);
  EXPECT_EQ((*auth)->Check("", Access::kWrite), AuthVerdict::kUnauthenticated);
  EXPECT_EQ((*auth)->Check("", Access::kRead), AuthVerdict::kUnauthenticated);
}

TEST_F(CallAuthTest, QueryOnlyAuthReadsWithTheQueryTokenAndNobodyWrites) {
  config::AuthConfig config;
  config.query_token_file = Write("query", "query-token\n", 0600);
  absl::StatusOr<std::unique_ptr<CallAuth>> auth = CallAuth::Create(config);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ((*auth)->Check("Bearer query-token", Access::kRead), AuthVerdict::kAllowed);
  EXPECT_EQ((*auth)->Check("Bearer query-token", Access::kWrite), AuthVerdict::kPermissionDenied);
  EXPECT_EQ((*auth)->Check("", Access::kWrite), AuthVerdict::kUnauthenticated);
}

TEST_F(CallAuthTest, RefusesUnsafeOrIdenticalTokenFiles) {
  config::AuthConfig open;
  open.ingest_token_file = Write("ingest", "ingest-token\n", 0644);
  absl::StatusOr<std::unique_ptr<CallAuth>> refused = CallAuth::Create(open);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("auth.ingestTokenFile"), std::string::npos);
  EXPECT_EQ(refused.status().message().find("ingest-token"), std::string::npos);

  config::AuthConfig same;
  same.ingest_token_file = Write("a", "same-token\n", 0600);
  same.query_token_file = Write("b", "same-token\n", 0600);
  absl::StatusOr<std::unique_ptr<CallAuth>> identical = CallAuth::Create(same);
  ASSERT_FALSE(identical.ok());
  EXPECT_EQ(identical.status().message().find("same-token"), std::string::npos);
}

// --- Tokens on the client side (secure_channel.h) ---------------------------

TEST(LocalTargetTest, KnowsUnixSocketsAndLoopbackOnly) {
  EXPECT_EQ(client::LocalTarget("unix:/run/perld/perld.sock"), UDS);
  EXPECT_EQ(client::LocalTarget("unix:///run/perld.sock"), UDS);
  EXPECT_EQ(client::LocalTarget("unix-abstract:perld"), UDS);
  for (const char* loopback :
       {"127.0.0.1:9717", "127.3.2.1:1", "localhost:9717", "LocalHost:9717", "[::1]:9717",
        "ipv4:127.0.0.1:9717", "ipv6:[::1]:9717", "dns:///localhost:9717", "localhost"}) {
    EXPECT_EQ(client::LocalTarget(loopback), LOCAL_TCP) << loopback;
  }
  for (const char* remote :
       {"10.0.0.5:9717", "perld.example:9717", "[2001:db8::1]:9717", "128.0.0.1:9717",
        "localhost.example.com:9717", "dns:///perld.example:443", "ipv4:127.0.0.1:1,10.0.0.1:1",
        "127.0.0.1.example:9717"}) {
    EXPECT_EQ(client::LocalTarget(remote), std::nullopt) << remote;
  }
}

TEST_F(SecretFileTest, TokenIsRefusedOnAPlaintextChannelToAnotherHost) {
  client::ChannelSecurity security;
  security.token_file = Write("token", "s3cr3t\n", 0600);
  for (const char* remote : {"10.0.0.5:9717", "perld.example:9717"}) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = client::OpenChannel(remote, security);
    ASSERT_FALSE(channel.ok()) << remote;
    EXPECT_EQ(channel.status().code(), absl::StatusCode::kFailedPrecondition);
    const std::string message(channel.status().message());
    EXPECT_NE(message.find(remote), std::string::npos) << message;
    EXPECT_NE(message.find("--tls"), std::string::npos) << message;      // perlctl
    EXPECT_NE(message.find("tls: true"), std::string::npos) << message;  // upstream
    EXPECT_EQ(message.find("s3cr3t"), std::string::npos) << message;
  }
  // With TLS, or without a token, any host will do (nothing connects yet).
  client::ChannelSecurity tls = security;
  tls.tls = true;
  EXPECT_TRUE(client::OpenChannel("perld.example:9717", tls).ok());
  EXPECT_TRUE(client::OpenChannel("perld.example:9717", client::ChannelSecurity{}).ok());
  EXPECT_TRUE(client::OpenChannel("127.0.0.1:9717", security).ok());
  EXPECT_TRUE(client::OpenChannel("unix:/tmp/none.sock", security).ok());
}

// A Query service that answers ListRuns with one run named after the call's
// authorization header ("" when absent).
class EchoAuthorization final : public v1::Query::Service {
 public:
  grpc::Status ListRuns(grpc::ServerContext* context, const v1::ListRunsRequest*,
                        v1::ListRunsResponse* response) override {
    const auto& metadata = context->client_metadata();
    const auto it = metadata.find("authorization");
    response->add_runs()->set_name(
        it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size()));
    return grpc::Status::OK;
  }
};

// The header a plaintext server receives through OpenChannel(target).
absl::StatusOr<std::string> HeaderSeen(const std::string& target,
                                       const client::ChannelSecurity& security) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = client::OpenChannel(target, security);
  if (!channel.ok()) return channel.status();
  std::unique_ptr<v1::Query::Stub> stub = v1::Query::NewStub(*channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListRunsResponse response;
  const grpc::Status status = stub->ListRuns(&context, v1::ListRunsRequest(), &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  if (response.runs_size() != 1) return absl::InternalError("no answer");
  return response.runs(0).name();
}

TEST_F(SecretFileTest, TokenReachesAPlaintextServerOverLoopbackAndUnixSockets) {
  EchoAuthorization echo;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  const std::string socket = dir_ + "/perld.sock";
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(&echo);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_NE(port, 0);

  client::ChannelSecurity security;
  security.token_file = Write("token", "s3cr3t-token\n", 0600);
  for (const std::string& target :
       {absl::StrCat("127.0.0.1:", port), absl::StrCat("localhost:", port),
        absl::StrCat("ipv4:127.0.0.1:", port), "unix:" + socket}) {
    absl::StatusOr<std::string> header = HeaderSeen(target, security);
    ASSERT_TRUE(header.ok()) << target << ": " << header.status();
    EXPECT_EQ(*header, "Bearer s3cr3t-token") << target;
    absl::StatusOr<std::string> none = HeaderSeen(target, client::ChannelSecurity{});
    ASSERT_TRUE(none.ok()) << target << ": " << none.status();
    EXPECT_EQ(*none, "") << target;
  }
  server->Shutdown();
  std::remove(socket.c_str());
}

}  // namespace
}  // namespace perld::service
