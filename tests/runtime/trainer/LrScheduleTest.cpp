//===- LrScheduleTest.cpp - The learning rate of each step ----------------===//
#include "runtime/trainer/LrSchedule.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace mist::rt;

TEST(LrSchedule, DefaultIsCosineToATenthAsBefore) {
  const LrSchedule s{1e-3f, 2, 10};
  EXPECT_FLOAT_EQ(s.at(1), 5e-4f); // warmup
  EXPECT_FLOAT_EQ(s.at(2), 1e-3f);
  // The formula of the runs before schedules were recorded, bit for bit.
  for (int step = 3; step <= 12; ++step) {
    const int into = std::min(step - 2, 8);
    EXPECT_EQ(s.at(step), 1e-3f * float(0.1 + 0.45 * (1 + std::cos(3.141592653589793 * into / 8))))
        << step;
  }
  EXPECT_FLOAT_EQ(s.at(10), 1e-4f);
  EXPECT_EQ(s.str(), "lr 0.001, warmup 2, 10 steps");
}

TEST(LrSchedule, LinearConstantAndAFloor) {
  const LrSchedule linear{1e-3f, 0, 10, LrDecay::Linear, 0.f};
  EXPECT_FLOAT_EQ(linear.at(5), 5e-4f);
  EXPECT_FLOAT_EQ(linear.at(10), 0.f);
  EXPECT_FLOAT_EQ(linear.at(20), 0.f); // past the end: where it ended
  const LrSchedule cosine{1e-3f, 0, 10, LrDecay::Cosine, 2e-4f};
  EXPECT_FLOAT_EQ(cosine.at(5), 6e-4f); // halfway: the mean of lr and the floor
  EXPECT_FLOAT_EQ(cosine.at(10), 2e-4f);
  const LrSchedule constant{1e-3f, 4, 10, LrDecay::Constant};
  EXPECT_FLOAT_EQ(constant.at(2), 5e-4f);
  EXPECT_FLOAT_EQ(constant.at(9), 1e-3f);
  EXPECT_EQ(constant.str(), "lr 0.001, warmup 4, 10 steps, constant");
}

TEST(LrSchedule, WsdIsStableThenDecays) {
  // 2 warmup steps, then 8: 6 stable, the last 2 (0.25 of 8) decay to 1e-5.
  const LrSchedule s{1e-3f, 2, 10, LrDecay::Wsd, 1e-5f, 0.25f};
  for (int step = 3; step <= 8; ++step)
    EXPECT_FLOAT_EQ(s.at(step), 1e-3f) << step;
  EXPECT_FLOAT_EQ(s.at(9), 1e-5f + (1e-3f - 1e-5f) * 0.5f);
  EXPECT_FLOAT_EQ(s.at(10), 1e-5f);
  EXPECT_EQ(s.str(), "lr 0.001, warmup 2, 10 steps, wsd (decaying over the last 0.25) to 1e-05");
}

TEST(LrSchedule, CheckpointsRecordIt) {
  const LrSchedule s{3e-4f, 5, 100, LrDecay::Wsd, 3e-5f, 0.1f};
  std::map<std::string, std::string> meta;
  s.toMetadata(meta);
  std::string error;
  auto back = LrSchedule::fromMetadata(meta, error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(*back, s);
  // A checkpoint from before decay styles were recorded: the default.
  meta = {{"lr", "0.001"}, {"warmup_steps", "0"}, {"schedule_steps", "8"}};
  back = LrSchedule::fromMetadata(meta, error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(*back, (LrSchedule{1e-3f, 0, 8}));
  meta["lr_decay"] = "exponential";
  EXPECT_FALSE(LrSchedule::fromMetadata(meta, error));
  EXPECT_NE(error.find("lr_decay 'exponential'"), std::string::npos) << error;
}
