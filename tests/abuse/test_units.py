"""The pure parts: keyed network prefixes, prompt sketches, the policy; a property test
holds the policy to its contract on arbitrary signals."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenward.abuse.network import NetworkHasher, client_address, prefix_bytes
from tokenward.abuse.policy import SEVERITY, fires, propose
from tokenward.abuse.sketch import Sketcher, normalize
from tokenward.config.abuse import SIGNALS, AbuseConfig, AbuseRule, CampaignConfig


def test_a_prefix_hides_the_host_and_needs_the_secret():
    one, two = NetworkHasher(b"s" * 32), NetworkHasher(b"t" * 32)
    assert one.of("203.0.113.7") == one.of("203.0.113.200") == one.of("::ffff:203.0.113.9")   # one /24
    assert one.of("203.0.114.7") != one.of("203.0.113.7")
    assert one.of("2001:db8:1:2::1") == one.of("2001:db8:1:ffff::9") != one.of("2001:db8:2::1")  # one /48
    assert one.of("203.0.113.7") != two.of("203.0.113.7")                                 # keyed
    assert one.of("not an address") is None and one.of(None) is None
    assert "203" not in one.of("203.0.113.7") and len(one.of("203.0.113.7")) == 16
    assert prefix_bytes("10.1.2.3") == b"4:\x0a\x01\x02"


def test_client_address_from_proxy_headers():
    assert client_address(b"198.51.100.7, 10.0.0.1") == "198.51.100.7"
    assert client_address(b"198.51.100.7:5123") == "198.51.100.7"
    assert client_address(b'for="[2001:db8::1]:443"') == "2001:db8::1"
    assert client_address(b"") is None


def test_sketches_match_near_duplicates_only_and_need_the_secret():
    sketcher = Sketcher(b"k" * 32, CampaignConfig())
    base = "Please write a short poem about the sea at night for my daughter's birthday card tomorrow."
    a = set(sketcher.bands_of([base]))
    b = set(sketcher.bands_of([base.upper() + "!!"]))            # case and punctuation: the same words
    c = set(sketcher.bands_of(["Explain the difference between TCP and UDP to a new network engineer."]))
    assert a == b and not a & c
    assert not a & set(Sketcher(b"j" * 32, CampaignConfig()).bands_of([base]))
    assert sketcher.bands_of(["too short"]) is None
    assert normalize("Ｈｅｌｌｏ, World!") == ["hello", "world"]
    assert not any(word in "".join(a) for word in ("poem", "sea", "birthday"))


RULES = (AbuseRule(name="reduce", when={"output_ratio": 4.0}, action="reduce_concurrency"),
         AbuseRule(name="suspend", when={"output_ratio": 10.0, "new_network": 1.0}, action="suspend"),
         AbuseRule(name="try", when={"refusals": 5.0}, action="restrict", shadow=True),
         AbuseRule(name="look", when={"campaign_keys": 20.0}, action="review", subject="tenant"))
signal_values = st.fixed_dictionaries({name: st.floats(0, 50) for name in SIGNALS})


@settings(max_examples=300)
@given(signals=signal_values, shadow=st.booleans())
def test_the_policy_proposes_the_strongest_firing_action(signals, shadow):
    config = AbuseConfig(shadow=shadow, rules=RULES)
    proposals = propose(config, "key", "acme", "k1", signals)
    firing = [r for r in RULES if r.subject == "key" and fires(r, signals)]
    assert {p.rule.name for p in proposals} <= {r.name for r in firing}
    assert len([p for p in proposals if not p.shadow]) <= 1 and len([p for p in proposals if p.shadow]) <= 1
    if firing:
        strongest = max(SEVERITY[r.action] for r in firing)
        assert max(p.severity for p in proposals) == strongest
    if shadow:
        assert all(p.shadow for p in proposals)       # nothing is enforced in shadow mode
    enforced = [p for p in proposals if not p.shadow]
    for p in proposals:
        if p.shadow and enforced:
            assert p.severity > enforced[0].severity   # a shadow proposal only beside a milder enforced one
    assert not [p for p in proposals if p.rule.subject != "key"]


def test_the_policy_reads_each_subject_by_its_rules():
    config = AbuseConfig(shadow=False, rules=RULES)
    assert [p.rule.name for p in propose(config, "tenant", "acme", None, {"campaign_keys": 25.0})] == ["look"]
    assert propose(config, "key", "acme", "k", {"campaign_keys": 25.0}) == []


def test_the_minhash_agrees_on_a_lane_as_often_as_the_shingle_sets_overlap():
    """The sketch's one promise: two prompts agree on a lane with probability equal to the
    Jaccard similarity of their shingle sets (here 1/3 and 3/5), averaged over many secrets
    (each secret is a fresh family of hash functions), however few shingles a prompt has."""
    config = CampaignConfig(shingle_words=1, min_chars=1)
    words = [f"w{i}" for i in range(40)]
    # the last: six shingles in 64 bins, nearly every bin filled by densification
    cases = {1 / 3: (words[:20], words[10:30]), 3 / 5: (words[:32], words[8:40]), 1 / 2: (words[:6], words[2:8])}
    for jaccard, (left, right) in cases.items():
        agree = lanes = 0
        for seed in range(100):
            sketcher = Sketcher(seed.to_bytes(4, "little") * 8, config)
            a, b = sketcher.signature([" ".join(left)]), sketcher.signature([" ".join(right)])
            agree += sum(x == y for x, y in zip(a, b))
            lanes += len(a)
        assert abs(agree / lanes - jaccard) < 0.03, (jaccard, agree / lanes)
