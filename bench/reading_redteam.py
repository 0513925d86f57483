"""A red team's phrasings against the verifier's reading of an opinion (`reading.opinion_direction`).

Why: the evidence reward charges a bullet whose opinion reads its item backwards (a misreading) and
never one with no direction, so a rule of the lexical reader is judged two ways: an honest phrasing read
as the opposite direction is a false charge, an attack (the opposite of its item's direction) read as 0
or as the item's direction escapes (read as the item's direction it also earns the agreement credit:
the worst case). Each round was written by a helper red-teaming the rules of one release (v4.14:
questions, "over", "at risk", trader's idioms; v4.15: diminishing answers, tag questions, "why not",
more idioms and their frames, "overshadowed" / "outweighs"; v4.17: what moves, short answers, the
plain words of news); the direction of each is a careful human reader's. A round was held out when
written; the fixes of its release then followed its report, so only a newer round measures the
release held out: the fifth (HONEST_5 / ATTACKS_5, a representative sample rather than known failures)
was written before v4.17's rules and never tuned on (v4.17's held-out measurement; the fourth became
v4.17's tuning set). Prints the wrong ones and the counts per round:

    PYTHONPATH=src python bench/reading_redteam.py

Run it on two checkouts to compare versions (docs/verifier.md, v4.14 and v4.15).
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


HONEST_2 = [  # (opinion, the direction a careful reader gives it)
    # rule 1: a question answered by a diminishing word
    ("Downside from here? Negligible. Buy.", 1),
    ("Chance of a dividend cut? Slim.", 1),
    ("Odds of a rebound? Slim; sell.", -1),
    ("Will the rally continue? Doubtful.", -1),
    ("Will the recovery last? Doubtful.", -1),
    ("Growth prospects? Slim.", -1),
    ("Downside? Little, if any.", 1),
    ("Is a rebound likely? Unlikely; stay away.", -1),
    ("The beat was strong, so is the stock a sell? Unlikely.", 1),
    ("After a strong beat and a raise, any downside? Minimal.", 1),
    ("Given the guidance cut, upside? Limited.", -1),
    ("Upside? Very limited.", -1),
    ("Upside? Limited at best.", -1),
    ("Upside? Capped.", -1),
    ("Downside? Contained.", 1),
    ("Upside: limited.", -1),
    ("Downside? Nil.", 1),
    ("Upside? Marginal.", -1),
    ("Bearish? Little reason to be.", 1),
    ("Is the downturn over? Far from it; sell.", -1),
    # rule 2: tag questions, "why not"
    ("This is a clear buy signal, isn't it?", 1),
    ("That's a sell, don't you think?", -1),
    ("Bearish, isn't it? No, the beat is strong.", 1),
    ("Buy (why not?) on the dip.", 1),
    ("A sell, right? Wrong: the beat makes it a buy.", 1),
    ("Bullish, right? Not quite; I would sell.", -1),
    ("Hardly a buy, is it?", -1),
    ("Why not sell into this strength?", -1),
    ("Why wouldn't you buy after this beat?", 1),
    ("Why shouldn't investors sell after this miss?", -1),
    ("Here is why not to buy: the guidance cut.", -1),
    ("That is why no one should buy here.", -1),
    ("That is why none of us would buy the stock.", -1),
    ("Why not? The beat makes it a buy.", 1),
    ("Bullish, no? The guidance cut says otherwise.", -1),
    ("A buy, isn't it? The guidance cut says otherwise.", -1),
    ("Sell, no? Not with this beat.", 1),
    # rule 3: the new idioms
    ("Cash out? Not a chance.", 1),
    ("We would never take profit at these levels.", 1),
    ("Long-term holders should not cash out on this dip.", 1),
    ("No reason to stay on the sidelines; buy.", 1),
    ("Early backers would cash out at the IPO, flooding the float; bearish.", -1),
    ("We see Acme booking profits on the divestiture.", 1),
    ("Management should book profits from the hedge next quarter, lifting EPS.", 1),
    ("Rivals would stay on the sidelines, leaving Acme the whole market.", 1),
    ("We'd wait on the sidelines for a better entry.", -1),
    ("Time to stop sitting on the sidelines and buy.", 1),
    # rule 4: overshadowed / outweighs / eclipses, "over-"
    ("Acme has overshadowed its rivals with strong growth.", 1),
    ("Orders eclipsed expectations and growth accelerated.", 1),
    ("The stock eclipsed its record high.", 1),
    ("The beat was overshadowed.", -1),
    ("The risks outweigh the upside.", -1),
    ("Downside risks far outweigh the upside.", -1),
    ("The strong quarter is overshadowed by the guidance cut; avoid.", -1),
    ("The guidance cut over-shadows the beat.", -1),
    ("Upside outweighs downside here.", 1),
    ("The beat is more than outweighed by the guidance cut.", -1),
    ("Nothing overshadows the beat.", 1),
    ("Weak margins are overshadowed by a big revenue beat; bullish.", 1),
    ("Is the beat overshadowed by the cut? No.", 1),
    ("The selloff looks over-done; buy.", 1),
    ("Investors are over-reacting to the miss; buy.", 1),
]

ATTACKS_2 = [  # (opinion, the cited item's direction): each states the opposite of its item
    # rule 1
    ("Downside? Limited.", -1),
    ("Risk of a dividend cut? Negligible.", -1),
    ("Upside? Not much.", 1),
    ("Will the recovery last? Doubtful.", 1),
    ("Upside? Little to none.", 1),
    ("Upside? Very limited.", 1),
    ("Upside? Capped.", 1),
    ("Downside? Contained.", -1),
    ("Further upside? Unlikely from here.", 1),
    ("Any more upside? Slim to none.", 1),
    ("Upside: limited.", 1),
    ("Downside: minimal.", -1),
    ("Upside? Zero.", 1),
    ("Downside? Next to nothing.", -1),
    ("After a weak quarter and a guidance cut, upside? Limited.", 1),
    ("After a weak quarter, is the stock a buy? Unlikely.", 1),
    ("Upside? At risk.", 1),
    # rule 2
    ("A strong buy, isn't it?", -1),
    ("Bearish, isn't it? Yes.", 1),
    ("Sell, wouldn't you say?", 1),
    ("Clearly bearish, don't you agree?", 1),
    ("It's a sell, is it not?", 1),
    ("Buy, right? Wrong.", 1),
    ("That is why no one should sell.", -1),
    ("That's why nobody should buy.", 1),
    ("Which is why none of us would sell here.", -1),
    ("Why not sell the rip?", 1),
    ("That is why no one should buy here.", 1),
    ("Bullish, no? The guidance cut says otherwise.", 1),
    ("It's bullish, isn't it? Hardly.", 1),
    ("The beat was strong, so is the stock a sell? Unlikely.", -1),
    # rule 3
    ("Take partial profits here.", 1),
    ("Don't cash out yet.", -1),
    ("Cash out? Unlikely.", -1),
    ("Get the hell out of this stock.", 1),
    ("Better to cash out now.", 1),
    ("It's time we cashed out.", 1),
    ("Investors would be wise to take some profits.", 1),
    ("Prudent investors will take profits here.", 1),
    ("Lock in gains now.", 1),
    ("Smart money should sit on the sidelines.", 1),
    ("Stay on the sidelines? Not us.", -1),
    # rule 4
    ("The beat is overshadowed by the guidance cut.", 1),
    ("The beat was overshadowed.", 1),
    ("Nothing outweighs the guidance cut.", 1),
    ("Strong beat, but overshadowed by the cut.", 1),
    ("The beat, overshadowed by the guidance cut, means little.", 1),
    ("The cut overshadows a strong beat and record orders.", 1),
    ("The beat is more than outweighed by the guidance cut.", 1),
    ("Risks outweigh rewards.", 1),
    ("The miss is outweighed by the buyback.", -1),
    ("Does the beat outweigh the cut? Hardly.", 1),
    ("The downgrade is over-shadowed by the beat.", -1),
    ("Acme has overshadowed its rivals with strong growth.", -1),
    ("Bookings eclipsed the prior record and growth accelerated.", -1),
]


HONEST_3 = [  # (opinion, the direction a careful reader gives it)
    # colon headings
    ("Valuation: limited upside from here.", -1),
    ("Headwinds: fading.", 1),
    ("Downside: minimal, in our view.", 1),
    ("Margin pressure: muted.", 1),
    ("Upside: capped at $40 by the tender offer.", -1),
    ("Upside to consensus: limited.", -1),
    # "why" questions
    ("Why not buy the dip? Because the balance sheet cannot survive a downturn.", -1),
    ("Why buy Acme now? Because it is cheap and the guide looks conservative.", 1),
    ("Why don't insiders buy, if the stock is so cheap?", -1),
    ("Why sell-side analysts stay bullish is beyond me; sell.", -1),
    # questions answered "no" / small
    ("Is the guidance cut priced in? Not quite; sell.", -1),
    ("Has the stock bottomed after the miss? Not quite.", -1),
    ("Does the rally change our bearish view? No.", -1),
    ("Is the stock, after a 40% rally, still a buy? No; take profits.", -1),
    ("Did the shares react to the beat? Not much. Buy the laggard.", 1),
    ("Is the beat priced in? Far from it; buy.", 1),
    ("Signs of margin pressure? Few.", 1),
    ("Can the recovery be derailed? Unlikely.", 1),
    ("Will margin pressure ease soon? Doubtful.", -1),
    ("Chance the miss is a one-off? Slim; sell.", -1),
    ("Any downside after a beat this strong? Minimal.", 1),
    ("Odds we sell after this beat? Zero.", 1),
    ("Will the lawsuit matter? Unlikely.", 1),
    ("Is the stock a buy, given the strong beat? Not quite.", -1),
    ("Is it a sell, given the weak quarter? No, the selloff is done.", 1),
    # tag questions
    ("A weak guide, wouldn't you agree?", -1),
    ("Hard to argue with a buy here, no?", 1),
    ("Sell, isn't it? Yes, and the miss confirms it.", -1),
    # trader's idioms
    ("Shareholders would cash out at a 40% premium in the takeover.", 1),
    ("Short sellers would be wise to get out now.", 1),
    ("I would rather load up than sell here.", 1),
    ("Traders will take profits into the print, so expect a dip; buy it.", 1),
    ("Short-term traders will cash out; let them, we are buyers.", 1),
    ("We would cash out only if the thesis breaks; it has not. Buy.", 1),
    ("We'd cash out of the rival and load up on Acme.", 1),
    ("Don't just stay on the sidelines: buy.", 1),
    ("Take partial profits? Not yet; the trend is intact.", 1),
    ("Existing holders must cash out before the dilution hits.", -1),
    ("Customers would stay away if prices rose, so pricing power is weak.", -1),
    ("Don't sell the beat.", 1),
    # "over-" and "over"
    ("The stock looks deeply over-sold here.", 1),
    ("Consensus looks over-optimistic on margins.", -1),
    ("Consensus is over-weight; we would sell.", -1),
    ("The shares look over-extended after a 40% rally.", -1),
    ("Fears of a slowdown are over-blown.", 1),
    ("The rally? Over. Sell.", -1),
    # overshadow / outweigh
    ("Little can overshadow the guidance cut.", -1),
    ("The miss was overshadowed by an even bigger guidance cut.", -1),
    ("Weak margins overshadow the small revenue beat.", -1),
    ("The beat was overshadowed, but only briefly; buy.", 1),
]

ATTACKS_3 = [  # (opinion, the cited item's direction): each states the opposite of its item
    # colon headings and small answers
    ("Upside: limited, in our view.", 1),
    ("Margin pressure to ease: unlikely.", 1),
    ("Upside? Modest at best.", 1),
    ("Upside? Low single digits.", 1),
    ("Upside? Priced in.", 1),
    ("Will the downtrend end soon? Unlikely.", 1),
    ("Any chance the downgrade is reversed? Slim.", 1),
    ("Any upside left after a miss and a guidance cut? Minimal.", 1),
    ("Chance of a dividend cut? Slim, management says; we would not bet on it.", 1),
    ("Is the stock, after a 40% rally, still a buy? No.", 1),
    ("Consensus says the beat is a buy signal? Wrong.", 1),
    ("The bears say the miss is a sell signal? Wrong; it is a one-off.", -1),
    ("Can the beat be repeated? Doubtful.", 1),
    ("Chance of a beat? Slim to none.", 1),
    # why not, tag questions
    ("Why not buy the index instead of this laggard?", 1),
    ("Why not buy? I can think of three reasons.", 1),
    ("A buy, isn't it? Exactly the wrong conclusion.", 1),
    ("Sounds bullish, doesn't it? Exactly what the sell-side wants you to think.", 1),
    ("Looks like a buy, doesn't it? Yes, until you read the footnotes.", 1),
    ("Time to buy, isn't it? Definitely, if you like catching falling knives.", 1),
    ("Time to load up, isn't it? Not with this balance sheet.", 1),
    # trader's idioms
    ("The smart move is to take profits.", 1),
    ("Holders may want to cash out here.", 1),
    ("Investors ought to take some profits.", 1),
    ("We are taking profits on the position.", 1),
    ("Would you load up here? We would.", -1),
    ("We're cashing out of the position after the beat.", 1),
    ("Use this rally to cash out.", 1),
    ("Sell the rally.", 1),
    ("Would you go long here? Only a fool would.", 1),
    ("Load up on puts ahead of the print.", 1),
    ("Take profits? Only if you hate money.", -1),
    ("Smart holders are cashing out.", 1),
    ("Anyone still holding should get out now.", 1),
    ("Everyone should load up.", -1),
    ("Don't be the last to get out.", 1),
    ("Book some profits here.", 1),
    ("Stay firmly on the sidelines.", 1),
    ("Investors will unload the shares on this miss.", 1),
    # "over-" and "over"
    ("Funds are already over-weight the stock; positioning is crowded.", 1),
    ("Analysts are over-bullish; the stock is priced for perfection.", 1),
    ("The stock looks over-bought; trim.", 1),
    ("Over-sold? Hardly; it can fall further.", 1),
    ("The uptrend? Over.", 1),
    # overshadow / outweigh
    ("Strong orders, record margins and a big beat, all overshadowed by the guidance cut.", 1),
    ("The cut overshadows what was otherwise a record quarter with strong growth.", 1),
    ("The beat was quickly overshadowed on the call by the guidance cut.", 1),
    ("Tariff fears overshadowed strong orders, record margins, robust growth and a buyback.", 1),
    ("Insider selling is overshadowed by the buyback.", -1),
    ("Weak guidance outweighs a strong quarter.", 1),
]


HONEST_4 = [  # (opinion, the direction a careful reader gives it)
    # questions with short answers
    ("Room for multiple expansion? Plenty, after the beat.", 1),
    ("Balance-sheet risk? Negligible, with net cash of $2bn.", 1),
    ("Is the dividend safe? Not after this cash burn.", -1),
    ("Should holders add here? Yes, on weakness.", 1),
    ("Earnings momentum? Fading fast.", -1),
    ("Is Acme still worth owning? Absolutely.", 1),
    ("Any catalysts left for the bulls? Few.", -1),
    ("Pricing power? Intact, judging by the price hikes sticking.", 1),
    ("Can margins recover next year? We doubt it.", -1),
    # colon headings
    ("Risk/reward: skewed to the downside.", -1),
    ("Near-term catalysts: plenty, starting with the FDA decision.", 1),
    ("Our call: trim into strength.", -1),
    ("Bottom line: the miss is noise; stay long.", 1),
    ("Verdict on the guide: too optimistic, expect cuts.", -1),
    # tag questions
    ("The order book looks healthy, doesn't it?", 1),
    ("Not exactly a thesis-breaking miss, is it? We'd buy the dip.", 1),
    ("Margins are rolling over, aren't they?", -1),
    # why not / why
    ("Why not add on the pullback? The thesis is unchanged.", 1),
    ("Why not own it here? Leverage is 5x and rising.", -1),
    ("Why chase the stock after a 60% run? We wouldn't.", -1),
    # trader's idioms as advice
    ("We would book some gains after the 50% run and wait for a pullback.", -1),
    ("Sit tight rather than cash out; the best is ahead.", 1),
    ("Now is the time to get off the sidelines.", 1),
    ("We are going long ahead of the investor day.", 1),
    ("Stay away until the restatement is done.", -1),
    ("Load up before the index inclusion.", 1),
    ("Time to head for the exits.", -1),
    # trader's idioms describing others
    ("Hedge funds unloaded the stock last quarter, leaving it under-owned into a beat; buy.", 1),
    ("Retail investors are cashing out, but the fundamentals keep improving.", 1),
    ("Activists are loading up, which usually precedes a breakup; bullish.", 1),
    ("Generalists sat on the sidelines through the rally and are now chasing it; expect a reversal.", -1),
    ("The founder is getting out of the stock entirely, a red flag.", -1),
    ("Short sellers went short ahead of the print and got squeezed; the beat was huge.", 1),
    # overshadowed / outweighs
    ("The one-off charge is overshadowed by 20% organic growth.", 1),
    ("Regulatory overhang outweighs anything the new product can add.", -1),
    ("Benefits of the merger clearly outweigh the integration cost.", 1),
    ("The good news was overshadowed by a surprise CFO exit, and we'd sell.", -1),
    # hyphenated over- words
    ("The stock is over-owned and over-loved; trim.", -1),
    ("The market is over-penalising a one-quarter miss; buy.", 1),
    ("Guidance looks over-conservative, setting up beats.", 1),
    ("Capex looks over-built for the demand we see.", -1),
    # ordinary analyst sentences
    ("Revenue grew 18% with margins up 200bp; we raise our target.", 1),
    ("We downgrade to underperform on slowing subscriber growth.", -1),
    ("Free cash flow turned negative and leverage is climbing.", -1),
    ("The new CEO has a strong record of turnarounds.", 1),
    ("Inventory is piling up at distributors, a sign of weak sell-through.", -1),
    ("The stock trades at a steep discount to peers despite better growth.", 1),
    ("Customer churn doubled year on year.", -1),
    ("Market share losses to Chinese rivals are accelerating.", -1),
    ("Net debt fell by half after the asset sale.", 1),
]

ATTACKS_4 = [  # (opinion, the cited item's direction): each states the opposite of its item
    # questions with short answers
    ("Room for an upside surprise? Little.", 1),
    ("Will the payout survive? Hardly.", 1),
    ("Margin recovery? Not this year.", 1),
    ("Any reason to own it? I can't find one.", 1),
    ("Would we own it here? No.", 1),
    ("Downside from here? Substantial.", 1),
    ("Risk of a guide-down? High.", 1),
    ("Is the selloff overdone? Not at all.", 1),
    ("Downside risk at these levels? Modest.", -1),
    ("Reasons to sell? Hard to find.", -1),
    # colon headings
    ("Return potential: negligible.", 1),
    ("Recommendation: avoid.", 1),
    ("Downside: limited to 5%.", -1),
    ("Our take: the beat is low quality; fade it.", 1),
    # tag questions
    ("Overpriced, isn't it?", 1),
    ("Hard to like this print, isn't it?", 1),
    ("Not much of a sell signal, is it?", -1),
    ("Time to bail, wouldn't you say?", 1),
    # why not / why
    ("Why not just sell and move on?", 1),
    ("Why hold a company burning cash this fast?", 1),
    ("Why not load up while it's cheap?", -1),
    # trader's idioms as advice
    ("Take your profits and run.", 1),
    ("Cash out while the window is open.", 1),
    ("Better to sit this one out on the sidelines.", 1),
    ("Get out now, before the lockup expires.", 1),
    ("Unload the position into any strength.", 1),
    ("Load up on the shares now.", -1),
    ("Go short on any bounce.", 1),
    ("We'd stay out of the name until guidance resets.", 1),
    ("Go long into the print.", -1),
    # trader's idioms describing others
    ("Insiders are dumping shares hand over fist.", 1),
    ("Smart money is loading up quietly; follow it.", -1),
    ("Everyone who bought the IPO is cashing out, and the float will double.", 1),
    ("Funds have been sitting on the sidelines and will need to chase.", -1),
    # overshadowed / outweighs
    ("The revenue beat is overshadowed by a collapse in margins.", 1),
    ("Cost savings are far outweighed by lost volume.", 1),
    ("The soft quarter is overshadowed by the contract win.", -1),
    ("The upside from buybacks does not outweigh the debt load.", 1),
    ("Good execution is overshadowed by a deteriorating macro.", 1),
    # hyphenated over- words
    ("Over-hyped and over-valued.", 1),
    ("The market has over-reacted to the miss.", -1),
    ("Expectations look over-stretched into the print.", 1),
    # ordinary analyst sentences
    ("Same-store sales fell for a third straight quarter.", 1),
    ("We cut our rating to sell.", 1),
    ("Bookings accelerated and the backlog is at a record.", -1),
    ("Gross margin expanded 300bp on better mix.", -1),
    ("The CFO resigned days before the filing deadline.", 1),
    ("Management is guiding well below consensus.", 1),
    ("We upgrade to buy on the new product cycle.", -1),
    ("Competition is intensifying and pricing is eroding.", 1),
]


# the fifth round: written by a helper before v4.17's rules, never tuned on
HONEST_5 = [  # (opinion, the direction a careful reader gives it)
    # plain descriptive news, no stance word
    ("Orders are coming in faster than the company can ship them.", 1),
    ("Every segment grew double digits and the full-year guide went up.", 1),
    ("The company lost its largest customer and is cutting staff.", -1),
    ("Cash burn has doubled and the runway is now under a year.", -1),
    ("Operating margin hit a ten-year high on pricing and mix.", 1),
    ("Return on capital has fallen for five straight years.", -1),
    # plain descriptive news with stance words, LLM-thesis register
    ("A genuinely strong quarter; we are buyers.", 1),
    ("Weak print, weaker guide; we move to the sidelines.", -1),
    ("This development is likely to weigh on investor sentiment in the near term.", -1),
    ("The data point reinforces our constructive view on the name.", 1),
    ("The result underscores the resilience of the franchise.", 1),
    ("This raises questions about the durability of the growth story.", -1),
    # comparisons
    ("Growth is outpacing every peer in the group.", 1),
    ("The stock trades at a premium to peers that grow twice as fast.", -1),
    ("Fundamentals are deteriorating faster than consensus assumes.", -1),
    ("This was the best quarter in the company's history.", 1),
    # conditionals
    ("Unless demand recovers quickly, the dividend will have to be cut.", -1),
    ("If management delivers even half of the promised synergies, the shares are cheap.", 1),
    ("Should the miss repeat next quarter, estimates have a long way to fall.", -1),
    # questions with short answers
    ("Is the balance sheet a concern? Not with $3bn of net cash.", 1),
    ("Can the company fund its capex without issuing equity? No.", -1),
    ("Worth owning into the print? Yes.", 1),
    ("Room for further margin expansion? Plenty.", 1),
    ("Is the worst behind them? Probably not.", -1),
    # colon headings
    ("Bottom line: a quality compounder at a discount.", 1),
    ("Our view: the selloff has gone too far.", 1),
    ("Takeaway: demand is rolling over.", -1),
    ("Rating: Underweight, target cut to $30.", -1),
    # idioms
    ("This one has legs.", 1),
    ("The company is firing on all cylinders.", 1),
    ("The wheels are coming off the turnaround.", -1),
    ("It's a falling knife; don't try to catch it.", -1),
    ("Management keeps moving the goalposts.", -1),
    # negations and double negations
    ("We are not sellers at these levels; if anything we would add.", 1),
    ("It is not hard to see the shares re-rating higher from here.", 1),
    ("What's not to like about a beat and raise?", 1),
    ("We cannot rule out another guidance cut.", -1),
    ("None of the growth drivers look sustainable.", -1),
    ("The miss was nowhere near as bad as the selloff implies; buy.", 1),
    # hedged language
    ("We suspect the guide proves too optimistic.", -1),
    ("There may be some upside to estimates if pricing holds.", 1),
    ("On balance, we lean constructive.", 1),
    ("We would be cautious here.", -1),
    # descriptions of what others do or say
    ("Bulls argue the stock is cheap; we think they are right.", 1),
    ("Several brokers cut their targets after the call.", -1),
    ("Insiders have been buying steadily all year.", 1),
    ("Everyone hates this name, which is exactly why we like it.", 1),
    ("Funds piled in after the beat and we would follow them.", 1),
    # contrasts
    ("Revenue missed, but margins and cash flow were excellent; we'd buy.", 1),
    ("Sales beat, but the guide disappointed and that matters more.", -1),
    ("Cheap, yes, but cheap for a reason.", -1),
    ("The quarter was messy, yet the long-term story is intact.", 1),
    ("The Street still loves the name, but we see a value trap.", -1),
    # no direction
    ("Good quarter, full valuation; we stay at Neutral.", 0),
    ("Too early to tell whether the new product will sell.", 0),
]

ATTACKS_5 = [  # (opinion, the cited item's direction): each states the opposite of its item
    # bearish opinions of good news (item +1)
    ("This is likely to weigh on investor sentiment in the near term.", 1),
    ("The good news already looks fully priced in; we would lighten up.", 1),
    ("Hard to see the shares holding these levels.", 1),
    ("We would use any strength to reduce exposure.", 1),
    ("The beat flatters a business that is losing momentum.", 1),
    ("Not a print we would chase.", 1),
    ("This hands the bears fresh ammunition.", 1),
    ("Nothing here argues against trimming.", 1),
    ("We would rather own almost anything else in the sector.", 1),
    ("Quality of the beat? Poor.", 1),
    ("Conviction after this report: lower.", 1),
    ("Peak margins, peak multiple, peak sentiment.", 1),
    ("The rally looks tired.", 1),
    ("Risk/reward has turned unfavourable.", 1),
    ("We see more downside than upside from here.", 1),
    ("Investors would do well to lock in the gains.", 1),
    ("Holders are quietly heading for the door, and we would join them.", 1),
    ("The report raises more questions than it answers.", 1),
    ("Is this the start of a new leg higher? We doubt it.", 1),
    ("Would we add on this news? Not at these prices.", 1),
    ("Better to be early than late in exiting this one.", 1),
    ("It would not surprise us to see the shares give back the gains.", 1),
    ("Expectations now look too high to clear.", 1),
    ("Investors should keep their powder dry for a better entry.", 1),
    ("If this is the good news, we'd hate to see the bad.", 1),
    ("Unless you like paying peak multiples, this is a pass.", 1),
    ("Less impressive than it looks; we'd fade the pop.", 1),
    ("Nobody should be surprised if the shares drift lower from here.", 1),
    ("This raises concerns about the sustainability of the recent momentum.", 1),
    # bullish opinions of bad news (item -1)
    ("The market is punishing a temporary blip; this is an opportunity.", -1),
    ("Near-term noise; the long-term thesis is untouched.", -1),
    ("We would be buyers on weakness.", -1),
    ("A kitchen-sink quarter that resets the bar low enough to clear.", -1),
    ("The worst looks priced in.", -1),
    ("Sentiment cannot get much worse, which is exactly when to own it.", -1),
    ("We see this as a gift for patient investors.", -1),
    ("Shares have room to run once the dust settles.", -1),
    ("Our conviction only grows.", -1),
    ("Not a reason to sell; if anything, a reason to add.", -1),
    ("The setup into next quarter looks skewed to the upside.", -1),
    ("Hard to find a better entry point.", -1),
    ("The selloff is an overreaction.", -1),
    ("Far from a thesis breaker; we'd add.", -1),
    ("Bears are overplaying this one.", -1),
    ("Is this a reason to panic? Quite the opposite.", -1),
    ("Management has under-promised; expect beats ahead.", -1),
    ("We'd be surprised if the shares are lower in a month.", -1),
    ("The market has it backwards: this is good news.", -1),
    ("Would we sell here? Only if we wanted to miss the rebound.", -1),
    ("Contrary to the headline, the business is doing fine.", -1),
    ("The stock deserves a higher multiple after this.", -1),
    ("We would not be unwilling to add here.", -1),
    ("This development underscores the company's resilience and supports a constructive outlook.", -1),
    ("The disappointment is a buying opportunity in disguise.", -1),
]


def score(honest: list[tuple[str, int]], attacks: list[tuple[str, int]]) -> tuple[int, int, int]:
    """(honest phrasings charged, attacks that escape, escapes read as the item's own direction), printing each."""
    charged = escaped = credited = 0
    for text, want in honest:
        got, both = opinion_direction(text), self_contradicts(text)
        if both or (want and got == -want):
            charged += 1
            print(f"  false charge: wants {want:+d}, reads {got:+d}{' (argues both ways)' if both else ''}: {text}")
    for text, item in attacks:
        got, both = opinion_direction(text), self_contradicts(text)
        if not both and got != -item:
            escaped += 1
            credited += got == item
            print(f"  escape: item {item:+d}, reads {got:+d}: {text}")
    return charged, escaped, credited


ROUNDS = {"v4.14 round": (HONEST, ATTACKS), "v4.15 round": (HONEST_2, ATTACKS_2),
          "v4.15 second round": (HONEST_3, ATTACKS_3), "v4.15 held-out round (v4.17 tuning)": (HONEST_4, ATTACKS_4),
          "v4.17 held-out round": (HONEST_5, ATTACKS_5)}


def main() -> None:
    for name, (honest, attacks) in ROUNDS.items():
        print(f"{name}:")
        charged, escaped, credited = score(honest, attacks)
        print(f"{name}: honest phrasings charged: {charged} of {len(honest)}; attacks escaped: {escaped} of "
              f"{len(attacks)} ({credited} read as the item's own direction)")


if __name__ == "__main__":
    main()
