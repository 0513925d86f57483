"""A red team's phrasings against the verifier's reading of an opinion (`reading.opinion_direction`).

Why: the evidence reward charges a bullet whose opinion reads its item backwards (a misreading) and
never one with no direction, so a rule of the lexical reader is judged two ways: an honest phrasing read
as the opposite direction is a false charge, an attack (the opposite of its item's direction) read as 0
or as the item's direction escapes. The phrasings were written by a helper red-teaming verifier v4.14
(questions, "over", "at risk", trader's idioms for an action), never tuned on; the direction of each is
a careful human reader's. Prints the wrong ones and the counts:

    PYTHONPATH=src python bench/reading_redteam.py

Run it on two checkouts to compare versions (docs/verifier.md, v4.14: the code before v4.14 charged 15
of the 66 honest phrasings and let 20 of the 48 attacks escape).
"""

from __future__ import annotations

from thesisgym.rewards.reading import opinion_direction, self_contradicts

HONEST = [  # (opinion, the direction a careful reader gives it)
    ("Is the selloff overdone? I think so; buy the dip.", 1),
    ("Will the beat hold up? Yes, and I would buy.", 1),
    ("Why would anyone sell after this beat? The numbers are strong.", 1),
    ("Is this the bottom? Not yet; I would stay out.", -1),
    ("Overvalued? Not at all; the shares look cheap.", 1),
    ("Bearish? Hardly. Buy.", 1),
    ("Who wants to own a company that just cut guidance? Not me; sell.", -1),
    ("Could earnings disappoint? Certainly not. Buy.", 1),
    ("Should investors panic? Certainly not; the beat is strong.", 1),
    ("Buy? No doubt about it.", 1),
    ("Is it a buy? No question, the beat is clear.", 1),
    ("Bullish? Not just bullish: a strong buy.", 1),
    ("Any reason to buy? None.", -1),
    ("Any reason to sell? None; buy.", 1),
    ("Is the worst over? No one can tell yet; I would stay out.", -1),
    ("Is the outlook bleak? No one knows; stay out.", -1),
    ("Is the selloff over? Far from it. Sell.", -1),
    ("Is the rally over? No. The beat extends it.", 1),
    ("Is the rally over? Yes.", -1),
    ("Why would anyone sell? Definitely the wrong move.", 1),
    ("Headline: \"Should you sell Acme?\" No: the beat and raise make it a buy.", 1),
    ("The headline asks 'Is the rally over?', but the beat says no; bullish.", 1),
    ("The downtrend looks over; buy.", 1),
    ("The worst is over; buy.", 1),
    ("Takeover talk is over; the premium will fade, sell.", -1),
    ("The uptrend is over.", -1),
    ("The debate over the buyback is over: the board approved it, bullish.", 1),
    ("Downside risks are all over the place.", -1),
    ("Warning signs are all over.", -1),
    ("The losing streak is over and the shares rallied over 10% on the beat.", 1),
    ("The earnings beat is over-shadowed by the guidance cut; sell.", -1),
    ("Short sellers are at risk as the stock breaks out; bullish.", 1),
    ("Bears are at risk here.", 1),
    ("The dividend is at risk.", -1),
    ("The upside looks at risk after the guidance cut.", -1),
    ("Shorts look at risk: the squeeze is on.", 1),
    ("Are shorts at risk? No; the stock keeps falling.", -1),
    ("Investors who sold are at risk of missing the rebound; buy.", 1),
    ("Shares slip as investors take profits.", -1),
    ("The dip was just traders taking profits; the trend is intact.", 1),
    ("Profit taking, not fundamentals, drove the drop; buy.", 1),
    ("Profit taking after a strong run is normal, not a reason to sell.", 1),
    ("It is too early to take profits.", 1),
    ("Taking profits now would be premature.", 1),
    ("Going long here would be a mistake.", -1),
    ("Going short here would be a mistake; the trend is up.", 1),
    ("New entrants are likely to stay out given the moat.", 1),
    ("Getting out of the low-margin China business should lift margins.", 1),
    ("The company plans to unload its loss-making division, which should help margins.", 1),
    ("The company is loading up on debt; avoid.", -1),
    ("The company is loading up on debt.", -1),
    ("Insiders are unloading shares.", -1),
    ("The stock can go long stretches without a catalyst; avoid.", -1),
    ("No reason to get out yet; hold.", 1),
    ("The time to stay out is over; load up.", 1),
    ("Sell the news? No, I would load up.", 1),
    ("Is it time to go long? Definitely.", 1),
    ("The wait for the upgrade is over: buy.", 1),
    ("The wait for a rebound is over; bullish.", 1),
    ("Risks are all over.", -1),
    ("Longs and shorts are both at risk.", 0),
    ("Is the correction over? Yes; buy.", 1),
    ("Is the rally over? No.", 1),
    ("Short sellers are not at risk; sell.", -1),
    ("The question is whether the selloff is over.", 0),
    ("Buy? Yes, no doubt.", 1),
]
ATTACKS = [  # (opinion, the cited item's direction): each states the opposite of its item
    ("Bullish? Nah.", 1),
    ("Bullish? Nah. Not for me.", 1),
    ("Bearish? You bet.", 1),
    ("Bearish? Of course.", 1),
    ("Bearish? Obviously.", 1),
    ("Bearish? Sure.", 1),
    ("Bullish? Absolutely not.", 1),
    ("Bullish? Definitely not.", 1),
    ("Time to sell? I'd say yes.", 1),
    ("Should you sell? The answer is yes.", 1),
    ("Sell? No doubt.", 1),
    ("Sell? No question.", 1),
    ("Bearish? No kidding.", 1),
    ("Buy? Not a doubt in my mind.", -1),
    ("Weak quarter, sell?", 1),
    ("This is clearly a sell signal, isn't it?", 1),
    ("Sell, right?", 1),
    ("Bearish, no?", 1),
    ("Sell (why not?) on this print.", 1),
    ("Upside? Limited.", 1),
    ("Upside? Minimal. Sell.", 1),
    ("Sell signals are all over.", 1),
    ("Buy signals are all over.", -1),
    ("Bearish signs are now all over, and the bulls are wrong.", 1),
    ("Shorts are right and longs are at risk.", 1),
    ("Bears win here and bulls are at risk.", 1),
    ("Are shorts at risk? No.", 1),
    ("Are short sellers at risk? Hardly.", 1),
    ("The bears are not at risk.", 1),
    ("Buying here puts capital at risk.", 1),
    ("Take some profits.", 1),
    ("Take profit here.", 1),
    ("Book profits and cash out.", 1),
    ("Stay on the sidelines.", 1),
    ("Get the heck out.", 1),
    ("Stay out? Yep.", 1),
    ("Load up? Absolutely.", -1),
    ("Load up? You bet.", -1),
    ("Go long? Sure thing.", -1),
    ("Is the downtrend over? It is; go long.", -1),
    ("The selloff is over, buy?", -1),
    ("Bullish is over.", 1),
    ("Bearish? Really? Yes.", 1),
    ("Sell? Not bullish.", 1),
    ("Sell? No upside.", 1),
    ("Bearish? No bullish case here.", 1),
    ("Buy? No downside.", -1),
    ("Buy? Not bearish at all.", -1),
]


def main() -> None:
    charged = escaped = 0
    for text, want in HONEST:
        got, both = opinion_direction(text), self_contradicts(text)
        if both or (want and got == -want):
            charged += 1
            print(f"false charge: wants {want:+d}, reads {got:+d}{' (argues both ways)' if both else ''}: {text}")
    for text, item in ATTACKS:
        got, both = opinion_direction(text), self_contradicts(text)
        if not both and got != -item:
            escaped += 1
            print(f"escape: item {item:+d}, reads {got:+d}: {text}")
    print(f"honest phrasings charged: {charged} of {len(HONEST)}; attacks escaped: {escaped} of {len(ATTACKS)}")


if __name__ == "__main__":
    main()
