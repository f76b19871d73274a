// NodeId (daemon/state/node_id.h): an edge's name at its parent -- the
// configured one, $PERLD_NODE_ID, or a UUID kept in the state directory.
#include "daemon/state/node_id.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace perld::state {
namespace {

class NodeIdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/node_id_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::remove(File().c_str());
    std::remove((File() + ".tmp").c_str());
    rmdir(dir_.c_str());
  }
  std::string File() const { return dir_ + "/" + kNodeIdFile; }
  std::string Read() const {
    std::ifstream in(File());
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::string dir_;
};

const std::regex kUuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");

TEST_F(NodeIdTest, RandomUuidsAreVersion4AndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<std::string> id = RandomUuid();
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE(std::regex_match(*id, kUuid)) << *id;
    seen.insert(*id);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST_F(NodeIdTest, CreatedOnceThenKept) {
  absl::StatusOr<std::string> first = StoredNodeId(dir_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(std::regex_match(*first, kUuid)) << *first;
  EXPECT_EQ(Read(), *first + "\n");
  EXPECT_NE(access((File() + ".tmp").c_str(), F_OK), 0);  // renamed into place
  absl::StatusOr<std::string> again = StoredNodeId(dir_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *first);
}

TEST_F(NodeIdTest, ConfiguredThenEnvironmentThenStateDirectory) {
  EXPECT_EQ(*ResolveNodeId("edge-7", "from-env", dir_), "edge-7");
  EXPECT_EQ(*ResolveNodeId("", "from-env", dir_), "from-env");
  EXPECT_NE(access(File().c_str(), F_OK), 0);  // nothing stored while not needed
  absl::StatusOr<std::string> stored = ResolveNodeId("", "", dir_);  // empty env: unset
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*ResolveNodeId("", nullptr, dir_), *stored);
}

TEST_F(NodeIdTest, AnEditedIdIsKeptABrokenOneIsAnError) {
  std::ofstream(File()) << "  rack-4-edge\n";
  EXPECT_EQ(*StoredNodeId(dir_), "rack-4-edge");
  for (const char* bad : {"", "\n", "two words\n", "a/b\n"}) {
    std::ofstream(File(), std::ios::trunc) << bad;
    absl::StatusOr<std::string> id = StoredNodeId(dir_);
    ASSERT_FALSE(id.ok()) << bad;
    EXPECT_EQ(id.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(id.status().message().find(File()), std::string::npos) << id.status();
  }
}

TEST_F(NodeIdTest, AnUnwritableDirectoryIsAnError) {
  EXPECT_FALSE(StoredNodeId(dir_ + "/missing").ok());
}

}  // namespace
}  // namespace perld::state
