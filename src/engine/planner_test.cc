// Plan logic on facts built in memory, as ninja's PlanTest builds on an
// in-memory State: no node, no network, no sshd, no container. The fake
// providers decide from a few attributes so that each case reads as the
// plan it expects.
#include "src/engine/planner.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace fleet {
namespace {

// A provider whose diff is spelled out by the desired resource's
// attributes:
//   "v": the value wanted; an actual with another "v" is updated, a missing
//        actual created.
//   "error": the diff's error.
//   "wait_for": an address the change adds to its depends_on (beyond the
//        declared ones), as a serve waits for an orphan that holds its port.
//   "before_removals": addresses of removals that must wait for this change.
//   "power": "off" or "on_demand" (the node-itself type only).
//   "unplanned_cost": what UnplannedCost says.
// An orphan record is deleted; an inventory line "stray NAME" on a node is
// an unrecorded resource, removed with --purge.
class FakeProvider : public Provider {
 public:
  FakeProvider(std::string type, bool node_itself) : type_(std::move(type)), node_(node_itself) {}

  std::string type() const override { return type_; }
  bool IsNodeItself() const override { return node_; }
  DeclaredPower PowerOf(const DesiredResource& r) const override {
    const std::string p = r.attributes.value("power", "on");
    return p == "off" ? DeclaredPower::kOff
                      : (p == "on_demand" ? DeclaredPower::kOnDemand : DeclaredPower::kOn);
  }
  std::string UnplannedCost(const DesiredResource& r) const override {
    return r.attributes.value("unplanned_cost", "");
  }
  std::vector<DesiredResource> Expand(const Manifest&) const override { return {}; }
  std::string ProbeScript(const DesiredResource&, const NodeSpec&) const override { return ""; }
  ActualResource ParseProbe(const DesiredResource&, const std::string&,
                            const NodeFacts&) const override {
    return {};
  }

  PlanChange Diff(const DesiredResource& d, const ActualResource& actual, const ResourceRecord*,
                  const DiffContext& ctx) const override {
    PlanChange c = ChangeFor(d);
    c.error = d.attributes.value("error", "");
    if (!ctx.facts.reachable && !node_) c.error = d.address + ": node not reachable";
    if (!actual.exists) {
      c.action = Action::kCreate;
    } else if (actual.attributes.value("v", "") != d.attributes.value("v", "")) {
      c.action = Action::kUpdate;
    }
    if (d.attributes.contains("wait_for"))
      c.depends_on.push_back(d.attributes["wait_for"].get<std::string>());
    if (d.attributes.contains("before_removals"))
      for (const auto& a : d.attributes["before_removals"])
        c.before_removals.push_back({a.get<std::string>(), "the old one is in the way"});
    return c;
  }

  PlanChange DiffDestroy(const DesiredResource& d, const ActualResource& actual,
                         const ResourceRecord*, const DiffContext&) const override {
    PlanChange c = ChangeFor(d);
    if (actual.exists) c.action = Action::kDelete;
    return c;
  }

  PlanChange DiffOrphan(const ResourceRecord& record, const DiffContext&) const override {
    PlanChange c = ForgetRecord(record);
    c.summary = "remove";
    c.detail = nlohmann::json::object();
    return c;
  }

  std::vector<PlanChange> DiffUnrecorded(const std::string& node,
                                         const DiffContext& ctx) const override {
    if (ctx.inventory == nullptr || ctx.inventory->rfind("stray ", 0) != 0) return {};
    PlanChange c;
    c.address = type_ + "." + ctx.inventory->substr(6) + "@" + node;
    c.type = type_;
    c.node = node;
    c.action = ctx.purge ? Action::kDelete : Action::kNoop;
    return {c};
  }

  Result<nlohmann::json> Apply(const PlanChange&, const StepContext&) const override {
    return Result<nlohmann::json>::Error("a plan test applies nothing");
  }

 private:
  std::string type_;
  bool node_;
};

class PlannerTest : public ::testing::Test {
 protected:
  PlannerTest() {
    // The registry's order: the node first, what runs on it after.
    providers_.push_back(std::make_unique<FakeProvider>("node", true));
    providers_.push_back(std::make_unique<FakeProvider>("model", false));
    providers_.push_back(std::make_unique<FakeProvider>("serve", false));
    providers_.push_back(std::make_unique<FakeProvider>("gateway", false));
    ctx_.manifest = &manifest_;
    ctx_.providers = &providers_;
    state_.lineage = "L";
    state_.serial = 7;
  }

  // A node that answers, declared and in place.
  void Node(const std::string& name, nlohmann::json attrs = nlohmann::json::object()) {
    DesiredResource r{NodeAddress(name), "node", name, name, std::move(attrs), {}, {}};
    if (r.attributes.is_null()) r.attributes = nlohmann::json::object();
    desired_.push_back(r);
    probed_.facts[name].reachable = true;
    Have(r.address, {});
  }

  // Resource `type.name@node`, depending on the node and `deps`.
  std::string Want(const std::string& type, const std::string& name, const std::string& node,
                   nlohmann::json attrs = nlohmann::json::object(),
                   std::vector<std::string> deps = {}) {
    DesiredResource r;
    r.type = type;
    r.name = name;
    r.node = node;
    r.address = ResourceAddress(type, name, node);
    if (!attrs.is_null()) r.attributes = std::move(attrs);  // `{}` reads as null
    r.depends_on = {NodeAddress(node)};
    r.depends_on.insert(r.depends_on.end(), deps.begin(), deps.end());
    desired_.push_back(r);
    return r.address;
  }

  // What the probe found at `address`.
  void Have(const std::string& address, nlohmann::json attrs) {
    ActualResource& a = probed_.actual[address];
    a.probed = true;
    a.exists = true;
    if (!attrs.is_null()) a.attributes = std::move(attrs);
  }

  void Record(const std::string& address, const std::string& type, const std::string& node) {
    state_.Upsert({address, type, node, nlohmann::json::object(), ""});
  }

  Plan Make() { return PlanFrom(ctx_, desired_, probed_, state_, options_); }

  // "address action" of each change that does something, in plan order.
  static std::vector<std::string> Steps(const Plan& plan) {
    std::vector<std::string> out;
    for (const PlanChange& c : plan.changes)
      if (c.action != Action::kNoop) out.push_back(c.address + " " + ActionName(c.action));
    return out;
  }

  static size_t IndexOf(const Plan& plan, const std::string& address) {
    for (size_t i = 0; i < plan.changes.size(); ++i)
      if (plan.changes[i].address == address) return i;
    ADD_FAILURE() << address << " is not in the plan";
    return plan.changes.size();
  }

  static bool DependsOn(const Plan& plan, const std::string& a, const std::string& b) {
    const PlanChange* c = plan.Find(a);
    return c != nullptr && std::count(c->depends_on.begin(), c->depends_on.end(), b) > 0;
  }

  Manifest manifest_;
  std::vector<std::unique_ptr<Provider>> providers_;
  PlanContext ctx_;
  std::vector<DesiredResource> desired_;
  ProbeResult probed_;
  State state_;
  PlanOptions options_;
};

TEST_F(PlannerTest, ConvergedIsNoop) {
  Node("n1");
  const std::string m = Want("model", "m", "n1", {{"v", "1"}});
  const std::string s = Want("serve", "s", "n1", {{"v", "2"}}, {m});
  Have(m, {{"v", "1"}});
  Have(s, {{"v", "2"}});
  Record(NodeAddress("n1"), "node", "n1");
  Record(m, "model", "n1");
  Record(s, "serve", "n1");
  const Plan plan = Make();
  EXPECT_TRUE(plan.errors.empty());
  EXPECT_FALSE(plan.HasChanges());
  EXPECT_EQ(plan.changes.size(), 3u);  // one noop per resource
  EXPECT_EQ(plan.lineage, "L");
  EXPECT_EQ(plan.serial, 7u);
}

TEST_F(PlannerTest, DependenciesComeFirst) {
  Node("n1");
  // Address order and type order both put "model.a" first; the declared
  // dependency puts it last.
  const std::string late = Want("model", "a", "n1", {{"v", "1"}}, {"serve.z@n1"});
  const std::string early = Want("serve", "z", "n1", {{"v", "1"}});
  const Plan plan = Make();
  ASSERT_TRUE(plan.errors.empty()) << plan.errors[0];
  EXPECT_EQ(Steps(plan), (std::vector<std::string>{early + " create", late + " create"}));
}

TEST_F(PlannerTest, TiesFollowProviderOrderThenAddress) {
  // By address alone the gateway would go first.
  Node("n1");
  const std::string s2 = Want("serve", "b", "n1");
  const std::string s1 = Want("serve", "a", "n1");
  const std::string g = Want("gateway", "a", "n1");
  const std::string m = Want("model", "z", "n1");
  const Plan plan = Make();
  EXPECT_EQ(Steps(plan), (std::vector<std::string>{m + " create", s1 + " create", s2 + " create",
                                                   g + " create"}));
}

TEST_F(PlannerTest, DependencyCycleIsAnError) {
  Node("n1");
  Want("serve", "a", "n1", {}, {"serve.b@n1"});
  Want("serve", "b", "n1", {}, {"serve.a@n1"});
  const Plan plan = Make();
  // About the plan as a whole: no one address.
  EXPECT_EQ(plan.errors,
            (std::vector<PlanDiagnostic>{{"", "dependency cycle between resources", ""}}));
}

TEST_F(PlannerTest, RemovalWaitsForTheChangeThatMustComeFirst) {
  // A gateway's reload away from an old serve runs before the old serve
  // is removed (create before destroy).
  Node("n1");
  Record("serve.old@n1", "serve", "n1");
  const std::string s = Want("serve", "new", "n1");
  const std::string g =
      Want("gateway", "g", "n1", {{"v", "2"}, {"before_removals", {"serve.old@n1"}}}, {s});
  Have(g, {{"v", "1"}});
  const Plan plan = Make();
  ASSERT_TRUE(plan.errors.empty()) << plan.errors[0];
  EXPECT_TRUE(DependsOn(plan, "serve.old@n1", g));
  EXPECT_LT(IndexOf(plan, s), IndexOf(plan, g));
  EXPECT_LT(IndexOf(plan, g), IndexOf(plan, "serve.old@n1"));
}

TEST_F(PlannerTest, RemovedFromManifestsIsRemoved) {
  Node("n1");
  Record(NodeAddress("n1"), "node", "n1");
  Record("serve.gone@n1", "serve", "n1");
  Record("model.gone@n1", "model", "n1");
  // No provider, on a node the manifests dropped: only forgotten.
  Record("unknown.thing@n9", "unknown", "n9");
  const Plan plan = Make();
  ASSERT_TRUE(plan.errors.empty()) << plan.errors[0];
  // An undeclared removal waits for those of later types on its node: the
  // serve goes before the model it ran on.
  EXPECT_TRUE(DependsOn(plan, "model.gone@n1", "serve.gone@n1"));
  EXPECT_EQ(Steps(plan), (std::vector<std::string>{"serve.gone@n1 delete", "model.gone@n1 delete",
                                                   "unknown.thing@n9 delete"}));
  ASSERT_NE(plan.Find("unknown.thing@n9"), nullptr);
  ASSERT_NE(plan.Find("serve.gone@n1"), nullptr);
  EXPECT_EQ(plan.Find("unknown.thing@n9")->detail.value("forget", false), true);
  EXPECT_EQ(plan.Find("serve.gone@n1")->summary, "remove");
}

TEST_F(PlannerTest, UnrecordedIsNamedAndPurged) {
  Node("n1");
  probed_.inventory["n1"]["serve"] = "stray lost";
  Plan plan = Make();
  ASSERT_NE(plan.Find("serve.lost@n1"), nullptr);
  EXPECT_FALSE(plan.HasChanges());
  options_.purge = true;
  plan = Make();
  EXPECT_EQ(Steps(plan), std::vector<std::string>{"serve.lost@n1 delete"});
  // Not in a targeted plan.
  options_.targets = {NodeAddress("n1")};
  EXPECT_EQ(Make().Find("serve.lost@n1"), nullptr);
}

TEST_F(PlannerTest, TargetSelectsWhatItNeeds) {
  Node("n1");
  Node("n2");
  const std::string m = Want("model", "m", "n1");
  const std::string s = Want("serve", "s", "n1", {}, {m});
  const std::string other = Want("serve", "o", "n2");
  options_.targets = {s};
  const Plan plan = Make();
  ASSERT_TRUE(plan.errors.empty()) << plan.errors[0];
  EXPECT_EQ(Steps(plan), (std::vector<std::string>{m + " create", s + " create"}));
  EXPECT_EQ(plan.Find(other), nullptr);
  EXPECT_EQ(plan.Find(NodeAddress("n2")), nullptr);
  EXPECT_EQ(plan.targets, options_.targets);
}

TEST_F(PlannerTest, DestroyTargetTakesWhatNeedsIt) {
  Node("n1");
  const std::string m = Want("model", "m", "n1");
  const std::string s = Want("serve", "s", "n1", {}, {m});
  Want("serve", "o", "n1");
  Have(m, {});
  Have(s, {});
  Have("serve.o@n1", {});
  options_.destroy = true;
  options_.targets = {m};
  const Plan plan = Make();
  ASSERT_TRUE(plan.errors.empty()) << plan.errors[0];
  // Backwards: what needs the model goes first; the other serve stays.
  EXPECT_EQ(Steps(plan), (std::vector<std::string>{s + " delete", m + " delete"}));
  EXPECT_TRUE(DependsOn(plan, m, s));
}

TEST_F(PlannerTest, UnknownTargetIsAnErrorAndPlansNothing) {
  Node("n1");
  Want("serve", "s", "n1");
  options_.targets = {"serve.nope@n1"};
  const Plan plan = Make();
  EXPECT_EQ(plan.errors, (std::vector<PlanDiagnostic>{
                             {"serve.nope@n1", "--target serve.nope@n1: no such resource", ""}}));
  EXPECT_TRUE(plan.changes.empty());
}

TEST_F(PlannerTest, AddedDependencyOutsideThePlanIsAnError) {
  Node("n1");
  Record("serve.old@n1", "serve", "n1");
  const std::string s = Want("serve", "s", "n1", {{"wait_for", "serve.old@n1"}});
  Plan plan = Make();
  ASSERT_TRUE(plan.errors.empty()) << plan.errors[0];
  EXPECT_TRUE(DependsOn(plan, s, "serve.old@n1"));
  EXPECT_LT(IndexOf(plan, "serve.old@n1"), IndexOf(plan, s));
  // --target leaves the old serve's removal out: the serve would wait for
  // nothing.
  options_.targets = {s};
  plan = Make();
  ASSERT_EQ(plan.errors.size(), 1u);
  EXPECT_EQ(plan.errors[0].address, s);
  EXPECT_EQ(plan.errors[0].summary,
            s + " must wait for serve.old@n1, which this plan does not change");
  EXPECT_EQ(plan.errors[0].detail, "add it with --target");
  // Shown as the one line it has always been.
  EXPECT_EQ(
      DiagnosticLines(plan.errors),
      std::vector<std::string>{s + " must wait for serve.old@n1, which this plan does not change "
                                   "(add it with --target)"});
}

TEST_F(PlannerTest, AddedDependencyOnNothingHasNoTargetHint) {
  Node("n1");
  const std::string s = Want("serve", "s", "n1", {{"wait_for", "serve.old@n1"}});
  const Plan plan = Make();
  // No --target left it out: there is nothing to add it with.
  ASSERT_EQ(plan.errors.size(), 1u);
  EXPECT_EQ(plan.errors[0].address, s);
  EXPECT_EQ(plan.errors[0].detail, "");
  EXPECT_EQ(plan.errors[0].ToString(),
            s + " must wait for serve.old@n1, which this plan does not change");
}

TEST_F(PlannerTest, WrongNodeIdentityPlansNothingOnIt) {
  Node("n1", {{"error", "node.n1: hostname is dgx9"}});
  Node("n2");
  Want("serve", "s", "n1");
  const std::string other = Want("serve", "s", "n2");
  const Plan plan = Make();
  // Keyed by the diff's address, read as the provider worded it.
  EXPECT_EQ(plan.errors,
            (std::vector<PlanDiagnostic>{{NodeAddress("n1"), "node.n1: hostname is dgx9", ""}}));
  EXPECT_EQ(plan.Find("serve.s@n1"), nullptr);
  EXPECT_EQ(Steps(plan), std::vector<std::string>{other + " create"});
}

TEST_F(PlannerTest, ProbeFailureIsAnErrorAndPlansNothingOnIt) {
  Node("n1");
  Want("serve", "s", "n1");
  Record("serve.old@n1", "serve", "n1");
  probed_.node_errors["n1"] = "n1: host key mismatch";
  probed_.facts["n1"].reachable = false;
  const Plan plan = Make();
  EXPECT_EQ(plan.errors,
            (std::vector<PlanDiagnostic>{{NodeAddress("n1"), "n1: host key mismatch", ""}}));
  EXPECT_TRUE(plan.changes.empty());
  EXPECT_TRUE(plan.unreachable.empty());
}

TEST_F(PlannerTest, UnreachableNodeNamesWhatItLeavesUnplanned) {
  Node("n1");
  probed_.facts["n1"].reachable = false;
  probed_.facts["n1"].unreachable_reason = "n1 (10.0.0.1:22): connection refused";
  Want("gateway", "g", "n1", {{"unplanned_cost", "its clients get no answer"}});
  Want("serve", "s", "n1");
  const Plan plan = Make();
  ASSERT_EQ(plan.unreachable.count("n1"), 1u);
  EXPECT_EQ(plan.unreachable.at("n1"),
            "n1 (10.0.0.1:22): connection refused; gateway.g@n1 is not planned, and its clients "
            "get no answer");
  EXPECT_EQ(plan.errors,
            (std::vector<PlanDiagnostic>{{"gateway.g@n1", "gateway.g@n1: node not reachable", ""},
                                         {"serve.s@n1", "serve.s@n1: node not reachable", ""}}));
}

TEST_F(PlannerTest, NodeDeclaredOffIsNotChecked) {
  Node("n1", {{"power", "off"}});
  probed_.facts["n1"].reachable = false;  // off, as declared
  const std::string s = Want("serve", "s", "n1");
  const Plan plan = Make();
  EXPECT_TRUE(plan.errors.empty());
  EXPECT_TRUE(plan.unreachable.empty());
  ASSERT_NE(plan.Find(s), nullptr);
  ASSERT_NE(plan.Find(s), nullptr);
  EXPECT_EQ(plan.Find(s)->action, Action::kNoop);
  EXPECT_EQ(plan.Find(s)->summary, "not checked: node n1 is declared off");
  // Only the node itself is probed there, and no inventory is listed.
  const PlanScope scope = ScopeOf(ctx_, desired_, state_, options_);
  ASSERT_EQ(scope.to_probe.size(), 1u);
  EXPECT_EQ(scope.to_probe[0].address, NodeAddress("n1"));
  EXPECT_TRUE(scope.inventory_nodes.empty());
}

TEST_F(PlannerTest, OnDemandNodeFoundAsleepIsNotChecked) {
  Node("n1", {{"power", "on_demand"}});
  probed_.facts["n1"].reachable = false;
  probed_.facts["n1"].power_switch_state = "off";
  const std::string s = Want("serve", "s", "n1");
  const Plan plan = Make();
  EXPECT_TRUE(plan.errors.empty());
  EXPECT_TRUE(plan.unreachable.empty());
  ASSERT_NE(plan.Find(s), nullptr);
  EXPECT_EQ(plan.Find(s)->summary,
            "not checked: node n1 is asleep (power: on_demand; a request wakes it)");
}

TEST_F(PlannerTest, ScopeOfAWholePlanListsInventories) {
  Node("n1");
  Node("n2");
  Want("serve", "s", "n2");
  Record("serve.old@n3", "serve", "n3");
  const PlanScope scope = ScopeOf(ctx_, desired_, state_, options_);
  EXPECT_EQ(scope.inventory_nodes, (std::set<std::string>{"n1", "n2"}));
  EXPECT_EQ(scope.orphans, std::set<std::string>{"serve.old@n3"});
  EXPECT_EQ(scope.to_probe.size(), 3u);
}

TEST_F(PlannerTest, FanOutChainsFollowTheContext) {
  Node("n1");
  Node("n2");
  Node("n3");
  // Two copies of one thing from n1 to n2 and n3.
  desired_.push_back({"model.m@n2", "model", "m", "n2", nlohmann::json::object(), {}, {}});
  desired_.push_back({"model.m@n3", "model", "m", "n3", nlohmann::json::object(), {}, {}});
  class CopyingProvider : public FakeProvider {
   public:
    CopyingProvider() : FakeProvider("model", false) {}
    PlanChange Diff(const DesiredResource& d, const ActualResource& a, const ResourceRecord* r,
                    const DiffContext& ctx) const override {
      PlanChange c = FakeProvider::Diff(d, a, r, ctx);
      c.copy = CopyRoute{};
      c.copy->what = "m";
      c.copy->from = "n1";
      c.copy->to = d.node;
      c.copy->to_address = "10.0.0." + d.node.substr(1);
      c.copy->direct = true;
      return c;
    }
  };
  providers_[1] = std::make_unique<CopyingProvider>();
  Plan plan = Make();
  ASSERT_NE(plan.Find("model.m@n2"), nullptr);
  ASSERT_TRUE(plan.Find("model.m@n2")->copy.has_value());
  EXPECT_EQ(plan.Find("model.m@n2")->copy->chain.size(), 2u);
  ctx_.chain_fan_outs = false;
  plan = Make();
  ASSERT_NE(plan.Find("model.m@n2"), nullptr);
  EXPECT_TRUE(plan.Find("model.m@n2")->copy->chain.empty());
}

}  // namespace
}  // namespace fleet
