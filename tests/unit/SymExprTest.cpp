//===- SymExprTest.cpp - Canonical printing of symbolic sizes -------------===//
#include "ir/SymExpr.h"

#include <gtest/gtest.h>

using namespace mist;

namespace {

struct Syms {
  SymbolTable t;
  Expr b, s, h, tp;
  Syms() {
    b = t.declare("b", SymbolKind::Batch, std::nullopt)->sym;
    s = t.declare("s", SymbolKind::Seq, 2048)->sym;
    h = t.declare("h", SymbolKind::Model, 1024)->sym;
    tp = t.declare("tp", SymbolKind::TP, std::nullopt)->sym;
  }
};

TEST(SymExpr, OrdersTermsByDegreeThenDeclarationOrder) {
  Syms x;
  Expr e = 4 * x.b * x.s * x.s * x.h / x.tp + 24 * x.b * x.s * x.h * x.h / x.tp + 7;
  EXPECT_EQ(printExpr(e, x.t), "4*b*s^2*h/tp + 24*b*s*h^2/tp + 7");
  // The same expression built in another order prints the same.
  Expr f = 7 + x.h * x.h * 24 * x.s * x.b / x.tp + x.h * x.s * x.s * x.b * 4 / x.tp;
  EXPECT_EQ(printExpr(f, x.t), printExpr(e, x.t));
}

TEST(SymExpr, PrintsRationalsAndNegativeTerms) {
  Syms x;
  EXPECT_EQ(printExpr(3 * x.h / (2 * x.tp), x.t), "3*h/(2*tp)");
  EXPECT_EQ(printExpr(x.h - 2 * x.s, x.t), "-2*s + h");
  EXPECT_EQ(printExpr(-x.b, x.t), "-b");
  EXPECT_EQ(printExpr(Expr(0), x.t), "0");
  EXPECT_EQ(printExpr(1 / x.tp, x.t), "1/tp");
}

TEST(SymExpr, BindsValuesAndDetectsWholeQuotients) {
  Syms x;
  EXPECT_EQ(exprToInt(x.t.bindAll(x.s * x.h)), 2048 * 1024);
  EXPECT_FALSE(exprToInt(x.t.bindAll(x.b * x.h)).has_value()); // b is free
  EXPECT_TRUE(isIntegerPolynomial(4 * x.h * x.s, x.t));
  EXPECT_FALSE(isIntegerPolynomial(x.h / x.tp, x.t));
  EXPECT_FALSE(isIntegerPolynomial(x.h / 2, x.t));
  EXPECT_TRUE(exprEqual((x.h + x.s) * (x.h - x.s), x.h * x.h - x.s * x.s));
}

TEST(SymExpr, GroupsDigits) {
  EXPECT_EQ(groupDigits(1315819520), "1,315,819,520");
  EXPECT_EQ(groupDigits(12), "12");
  EXPECT_EQ(groupDigits(-1000), "-1,000");
}

} // namespace
