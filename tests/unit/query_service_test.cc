// QueryService's WatchRun reactor against a RunRegistry, through a real
// in-process gRPC server (port 0) and the generated client: the registry's
// notifications drive the writes, and CancelWatches, a client's cancel and
// limits.maxWatchers end or refuse watches. No daemon, no recorder.
#include "daemon/service/query_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"

namespace perld::service {
namespace {

runs::RunInfo Running(runs::RunId id) {
  runs::RunInfo info;
  info.id = id;
  info.spec.name = "watched";
  info.spec.latency = LatencyConfig::ForUnit(TimeUnit::kNs);
  info.spec.latency.percentiles = {50};
  info.state = runs::RunState::kRunning;
  return info;
}

runs::WindowRecord Window(runs::RunId id, int64_t seq, runs::WindowRecord::Kind kind) {
  runs::WindowRecord w;
  w.run_id = id;
  w.kind = kind;
  w.seq = seq;
  w.seconds = 1;
  w.snapshot.records = w.snapshot.valid = seq;
  return w;
}

class QueryServiceTest : public ::testing::Test {
 protected:
  QueryServiceTest()
      : config_([] {
          config::DaemonConfig c;
          c.limits.max_watchers = 2;
          return c;
        }()),
        service_(registry_, config_, auth_) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    stub_ = v1::Query::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
    registry_.AddRunning(Running(1));
  }
  ~QueryServiceTest() override { server_->Shutdown(); }

  std::unique_ptr<grpc::ClientReader<v1::WatchRunResponse>> Watch(grpc::ClientContext* context) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::WatchRunRequest request;
    request.set_run("1");
    request.set_from_start(true);
    return stub_->WatchRun(context, request);
  }

  // Bounded: the server counts a watch once its handler ran, and lets it go
  // once gRPC is done with it.
  bool WaitForWatchers(int n) {
    for (int i = 0; i < 6000 && service_.watchers() != n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return service_.watchers() == n;
  }

  runs::RunRegistry registry_{config::RetentionConfig{}};
  config::CurrentConfig config_;
  CallAuth auth_;
  QueryService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Query::Stub> stub_;
};

// Each window is written when the registry publishes it, then the final
// total, then OK: nothing but the registry's notification wakes the watch.
TEST_F(QueryServiceTest, WatchWritesEachWindowAsPublishedThenTheTotal) {
  grpc::ClientContext context;
  auto reader = Watch(&context);
  v1::WatchRunResponse event;
  for (int64_t seq = 1; seq <= 3; ++seq) {
    registry_.AddWindow(Window(1, seq, runs::WindowRecord::Kind::kPeriodic));
    ASSERT_TRUE(reader->Read(&event)) << "window " << seq;
    EXPECT_EQ(event.window().kind(), v1::Window::KIND_PERIODIC);
    EXPECT_EQ(event.window().seq(), seq);
  }
  registry_.MarkEnded(1, Window(1, 0, runs::WindowRecord::Kind::kTotal), runs::RunState::kFinished,
                      "", 2000, nullptr);
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.window().kind(), v1::Window::KIND_TOTAL);
  EXPECT_TRUE(event.window().final());
  EXPECT_FALSE(reader->Read(&event));
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(WaitForWatchers(0));
}

// limits.maxWatchers refuses a third watch; a client's cancel frees its
// slot though its run publishes nothing; CancelWatches ends the others
// UNAVAILABLE and refuses new ones.
TEST_F(QueryServiceTest, LimitCancelAndShutdownEndWatches) {
  grpc::ClientContext first_context, second_context, third_context;
  auto first = Watch(&first_context);
  auto second = Watch(&second_context);
  ASSERT_TRUE(WaitForWatchers(2));
  auto third = Watch(&third_context);
  v1::WatchRunResponse event;
  EXPECT_FALSE(third->Read(&event));
  EXPECT_EQ(third->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  first_context.TryCancel();
  EXPECT_FALSE(first->Read(&event));
  EXPECT_EQ(first->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitForWatchers(1));

  service_.CancelWatches();
  EXPECT_FALSE(second->Read(&event));
  const grpc::Status ended = second->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ended.error_message(), "perld is shutting down");
  EXPECT_TRUE(WaitForWatchers(0));
  grpc::ClientContext late_context;
  auto late = Watch(&late_context);
  EXPECT_FALSE(late->Read(&event));
  EXPECT_EQ(late->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace perld::service
