"""False positives of the invented-fact checks: honest opinions and conclusions in varied analyst
English that only restate what their cited items say, scored against the template thesis of the same
row. An honest paraphrase flagged as a hallucination (`n_hallucinated` > 0) is a false positive, and
so is one read against its item's direction (`misread` > 0: the evidence reward pays that bullet 0).

    PYTHONPATH=src python bench/honest_paraphrase.py [--rows 60] [--real-rows 24] [--show]

Synthetic rows: the rows of bench/adversary_v4.py (seed 5); each bullet whose item matches a headline
pattern below gets each paraphrase of that pattern in turn (one edited thesis per paraphrase and row,
up to 3 rows per paraphrase). Real rows (AAPL + MSFT, ../shared/data; skipped when absent): the
paraphrases below are written for named headlines and replace (or add) the bullet citing them.
Conclusions: honest conclusions that name only the items' facts, on every row whose decision they fit.
Held-out: synthetic paraphrases written after the rules were set and never tuned on (HELDOUT, the
tuning set of v4.17 since; HELDOUT_2, written by a helper before v4.17's rules: v4.17's held-out set and
v4.18's tuning set; HELDOUT_3, REAL_2 and CONCLUSIONS_2, written by a helper before v4.18's rules: v4.18's
held-out set).
Prints the false-positive rate per kind with the number of paraphrases and edited theses, and with
--show each flagged text and its reasons.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from adversary_v4 import real_rows, synthetic_rows  # noqa: E402

from thesisgym.evaluate.reward_audit import Bullet, Doc  # noqa: E402
from thesisgym.rewards.base import evidence_index  # noqa: E402
from thesisgym.rewards.evidence import evidence_report  # noqa: E402
from thesisgym.teachers import TemplateTeacher  # noqa: E402
from thesisgym.thesis import parse_thesis  # noqa: E402

# headline pattern (regex on the item text) -> honest paraphrases ({x}: the item's first percentage)
SYNTHETIC: dict[str, tuple[str, ...]] = {
    r"orders jump ([\d.]+)%": (
        "Orders jumped {x}% on surging demand, a clear positive for the shares",
        "The order book is growing fast, up {x}%, which points to healthy demand going into next week",
        "Demand is surging and orders are up sharply; that is the kind of news that usually supports the stock",
    ),
    r"raises outlook; sales seen ([\d.]+)%": (
        "Management lifted its outlook and now expects sales about {x}% higher, citing strong demand",
        "A raised outlook on strong demand is constructive for the stock",
        "The company raised its guidance, so the sales picture is improving",
    ),
    r"loses key customer; ([\d.]+)%": (
        "Losing a key customer puts {x}% of revenue at risk, a clear negative for the shares",
        "The loss of a key customer is a real blow, with {x}% of revenue now at risk",
        "With a major customer gone, a slice of revenue is at risk, which weighs on the stock",
    ),
    r"to cut jobs as demand for .* falls ([\d.]+)%": (
        "The company is cutting jobs because demand fell {x}%, a sign that the business is under pressure",
        "Job cuts on falling demand are a bearish signal for the coming week",
    ),
    r"recall seen cutting profit ([\d.]+)%": (
        "The recall is expected to cut profit by about {x}%, which is negative for earnings",
        "A recall that trims profit by {x}% is a clear headwind for the shares",
    ),
    r"customer base grows ([\d.]+)%": (
        "The customer base grew {x}% to a record high, which is encouraging",
        "Record customer growth of {x}% signals strong demand for the business",
    ),
    r"downgrades .* to Sell": (
        "The broker downgraded the stock to Sell and cut its price target, a bearish call",
        "An analyst downgrade to Sell with a lower target weighs on sentiment",
    ),
    r"reiterates Hold": (
        "The analyst kept a Hold rating, so there is no new signal from the street",
    ),
    r"EPS .* expected \(\+([\d.]+)% surprise\)": (
        "Earnings beat expectations by {x}%, a solid quarter",
        "The company topped the EPS estimate, which supports the bull case",
    ),
    r"EPS .* expected \(-([\d.]+)% surprise\)": (
        "Earnings came in {x}% below expectations, a miss that weighs on the stock",
        "The company missed the EPS estimate, which is a negative for the shares",
    ),
    r"names new chief financial officer": (
        "The company appointed a new CFO, which is routine news with no clear direction",
        "A new finance chief was named, effective later this month; a management change with no clear direction",
        "The new chief financial officer starts soon, routine news for the stock",
    ),
    r"(?:CFO|COO|CEO|CTO|Director) .* buys": (
        "An executive bought shares in the open market, a vote of confidence from insiders",
        "Insider buying by a senior officer is a mildly bullish sign",
        "The executive put real money into the stock, which reads as confidence",
        "The executive's purchase of shares is a small positive",
    ),
    r"(?:CFO|COO|CEO|CTO|Director) .* sells": (
        "An executive sold a small block of shares, which is not much of a signal on its own",
        "The officer trimmed his holding a little; insider sales like this are often routine",
        "The executive's sale is small and says little about the outlook",
    ),
    r"declares quarterly dividend": (
        "The board declared its regular quarterly dividend, which changes little",
    ),
    r"opens office in": (
        "The company opened a new office, a minor expansion with no clear impact on the stock",
    ),
}
# a second set written after the rules were fixed and never tuned on (the out-of-sample rate)
HELDOUT: dict[str, tuple[str, ...]] = {
    r"orders jump ([\d.]+)%": ("New orders climbed {x}% as customers rushed to buy, so demand is clearly robust",),
    r"raises outlook; sales seen ([\d.]+)%": ("Guidance went up: the company now sees sales rising {x}% thanks to strong demand",),
    r"loses key customer; ([\d.]+)%": ("A big client walked away, leaving {x}% of revenue exposed",),
    r"to cut jobs as demand for .* falls ([\d.]+)%": ("Layoffs are coming because demand dropped {x}%, which hurts the near-term story",),
    r"recall seen cutting profit ([\d.]+)%": ("The product recall will eat into profit, roughly {x}% by the company's estimate",),
    r"customer base grows ([\d.]+)%": ("The company keeps adding customers, with the base up {x}% to an all-time high",),
    r"downgrades .* to Sell": ("A broker turned negative, cutting the stock to Sell and slashing its target",),
    r"EPS .* expected \(\+([\d.]+)% surprise\)": ("Quarterly profit topped forecasts by {x}%, an upside surprise",),
    r"EPS .* expected \(-([\d.]+)% surprise\)": ("Quarterly profit fell short of forecasts by {x}%, a disappointment",),
    r"names new chief financial officer": ("The firm hired a new CFO who takes over later this month; no read-through for the stock",),
    r"(?:CFO|COO|CEO|CTO|Director) .* buys": ("A top executive stepped in to buy stock, which signals belief in the business",),
    r"(?:CFO|COO|CEO|CTO|Director) .* sells": ("The executive cashed out a modest amount of stock; that alone proves little",),
    r"declares quarterly dividend": ("The quarterly payout was declared as usual, nothing new for shareholders",),
}
# a second held-out set, written by a helper before v4.17's rules and never tuned on ({x}: the
# regex's first group, not always a percentage)
HELDOUT_2: dict[str, tuple[str, ...]] = {
    r"orders jump ([\d.]+)%": (
        "Order intake is up {x}% with demand surging, a healthy demand signal and a plus for the stock",
        "Orders +{x}% on a demand surge; constructive",
    ),
    r"raises outlook; sales seen ([\d.]+)%": (
        "Guide raised: management now sees sales up {x}% on strong demand, which we read as bullish",
        "An upward revision to the outlook, with sales expected {x}% higher, supports the shares",
    ),
    r"loses key customer; ([\d.]+)%": (
        "The loss of a major account leaves {x}% of sales in jeopardy; negative",
        "With a key client gone and {x}% of revenue at risk, the top line looks vulnerable",
    ),
    r"to cut jobs as demand for .* falls ([\d.]+)%": (
        "Demand is down {x}% and the company is responding with job cuts, not a good sign",
        "Headcount reductions alongside a {x}% slide in demand point to a weakening business",
    ),
    r"recall seen cutting profit ([\d.]+)%": (
        "The recall is expected to knock roughly {x}% off profit, an earnings headwind",
        "A recall-driven profit hit of about {x}% is bad news for the shares",
    ),
    r"customer base grows ([\d.]+)%": (
        "Customer count up {x}% to an all-time high; good momentum",
        "A record customer base after {x}% growth is an encouraging sign",
    ),
    r"wins contract; backlog up ([\d.]+)%": (
        "A contract win took backlog up {x}%, which adds visibility and is a positive",
    ),
    r"downgrades .* to Sell": (
        "A broker moved the stock to a Sell rating and lowered its PT, a bearish call from the Street",
        "The downgrade to Sell, with a reduced price target, is a negative for sentiment",
    ),
    r"reiterates Hold on .*; price target \$([\d.]+)": (
        "The analyst stuck with a Hold and a ${x} target, a neutral stance that changes little",
        "Rating unchanged at Hold (PT ${x}); no new signal",
    ),
    r"EPS .* expected \(\+([\d.]+)% surprise\)": (
        "EPS came in {x}% ahead of consensus, a beat",
        "Earnings topped the Street's estimate by {x}%, which is good news for the stock",
    ),
    r"EPS .* expected \(-([\d.]+)% surprise\)": (
        "EPS undershot consensus by {x}%; a disappointing print",
        "Earnings fell {x}% short of what the Street expected, a negative",
    ),
    r"names new chief financial officer": (
        "The company named a new CFO, a management appointment that does not move our view",
        "A new finance chief has been appointed; neutral for the shares",
    ),
    r"(?:CFO|COO|CEO|CTO|Director) .* buys ([\d,]+) shares": (
        "An insider bought {x} shares, a show of confidence in the stock",
        "Insider purchase of {x} shares; a mildly positive read",
    ),
    r"(?:CFO|COO|CEO|CTO|Director) .* sells ([\d,]+) shares": (
        "An insider sold {x} shares, a weak signal that on its own tells us little",
        "Insider sale of {x} shares; not much to read into",
    ),
    r"declares quarterly dividend of \$([\d.]+)": (
        "The board declared a quarterly dividend of ${x} a share, nothing that changes the thesis",
    ),
    r"opens office in \w+ with (\d+) employees": (
        "A new office with {x} staff is a small step that does not move the needle",
    ),
    r"to present at the .* Conference on": (
        "The company will present at an upcoming conference; no read on fundamentals",
    ),
    r"Fed cuts policy rate by 25 bp to ([\d.]+)%": (
        "The Fed lowered its policy rate by 25 bp to {x}% as growth slows, macro context rather than a stock call",
    ),
    r"Fed holds policy rate at ([\d.]+)%": (
        "Rates were left at {x}% and the Fed sees balanced risks; a steady macro backdrop",
    ),
    r"US CPI rose ([\d.]+)% in \w+": (
        "Consumer prices rose {x}% on the month, inflation context for the broad market",
    ),
}
# real headlines (a distinctive substring) -> honest paraphrases
REAL: dict[str, tuple[str, ...]] = {
    "Raises Apple Price Target On iPhone Trade-In": (
        "Morgan Stanley raised its Apple target, pointing to the iPhone trade-in opportunity, a bullish read",),
    "Apple wins EU court battle": (
        "Apple won its court fight with the EU over the $15 billion Irish tax bill, which removes an overhang",),
    "Extends Rally as Analysts Gush": (
        "The stock kept rallying as analysts praised the WWDC keynote, so sentiment is clearly positive",),
    "Precipitous Sell-Off Adds Fuel to Buffett Rumors": (
        "A steep sell-off in Apple has fuelled rumours about Buffett, a bearish tone for the shares",),
    "Dips More Than Broader Markets": (
        "Apple slipped more than the broader market, a mildly negative sign",),
    "Piper Sandler raises AAPL target to $130": (
        "Piper Sandler lifted its target to $130 on the new Watch services, which supports the stock",),
    "Expands Wearables Portfolio With New Watches": (
        "Apple is expanding its wearables lineup with new watches, a modest positive",),
    "India Online Store Launch": (
        "The launch of the online store in India should add some festive cheer to sales",),
    "Assumes Apple (AAPL) at Neutral": (
        "UBS started coverage of Apple at Neutral, so the call itself has no clear direction",),
    "Dow Surges 500 Points; Apple Tesla Fuel Nasdaq": (
        "The Dow surged 500 points with Apple helping to fuel the Nasdaq, a supportive backdrop",),
    "Avoid #AAPL Stock": (
        "One newsletter calls Apple a stock to avoid, a bearish opinion from a single writer",),
    "Store Closings Drive Home the Uniqueness": (
        "Microsoft closing its stores highlights how unusual Apple's retail success is",),
    "Launches streaming service in latest blow to Netflix": (
        "AMC launched a streaming service, another blow to Netflix rather than news about this stock",),
    "Stumbles as Boeing (BA) & Apple (AAPL) Stock Suffer Setbacks": (
        "The Dow stumbled as Apple and Boeing suffered setbacks, a negative day for the shares",),
    "Solid Buys After Earnings": (
        "Analysts see a few Dow names as solid buys after earnings, a constructive tone",),
    "Watch Supercycle": (
        "The piece argues a Watch supercycle could let the stock run, a bullish thesis",),
}
# honest conclusions: (decision direction they fit, text)
CONCLUSIONS = (
    (1, "The news flow is the deciding factor: the positive items outweigh the mixed technical picture, so the "
        "balance tilts bullish for the coming week."),
    (1, "Most of what the record shows is constructive, and nothing in it argues strongly the other way; I lean "
        "bullish."),
    (-1, "The negative items carry more weight than the few positives, so the overall read is bearish for the "
         "week ahead."),
    (-1, "Taken together the record points lower: the bad news outweighs the good and the setup looks bearish."),
    (0, "The evidence is split, with positives and negatives roughly cancelling out, so a neutral stance fits."),
)


# v4.18's held-out set, written by a helper before v4.18's rules and never tuned on (its report: the
# stop-47 note); REAL_2's headlines and CONCLUSIONS_2 are new too
HELDOUT_3: dict[str, tuple[str, ...]] = {
    # --- informative news, bullish -------------------------------------------------------------------
    r"orders jump ([\d.]+)% as demand": (
        "Bookings are up {x}% with demand surging; that is a favourable set-up for the shares",
        "Order growth of {x}% on booming demand. Positive",
        "We think a {x}% jump in orders, driven by surging demand, argues for owning the stock",
    ),
    r"wins contract; backlog up ([\d.]+)%": (
        "A contract win lifted the backlog by {x}%, which improves revenue visibility; we read it positively",
        "Backlog +{x}% after the contract award, supportive",
    ),
    r"wins contract; backlog up [\d.]+% to \$(\d+) million": (
        "The order backlog now stands at ${x} million after a contract win, a healthy position",
    ),
    r"raises outlook; sales seen ([\d.]+)% higher": (
        "The guide went up, with sales now seen {x}% higher on strong demand, and that is bullish in our view",
        "Outlook lifted: the company expects sales to rise {x}%, helped by robust demand, which should support the stock",
        "Upgraded guidance on firm demand; a constructive signal",
    ),
    r"customer base grows ([\d.]+)% to a record": (
        "Customer numbers rose {x}% to a record level, a sign the franchise is gaining traction",
        "The client base expanded by {x}% and has never been larger; encouraging",
    ),
    # --- informative news, bearish -------------------------------------------------------------------
    r"to cut jobs as demand for .* falls ([\d.]+)%": (
        "Headcount cuts on the back of a {x}% fall in demand suggest the business is struggling, a negative",
        "Demand is off {x}% and staff reductions are planned, which looks bearish to us",
        "Job losses and weaker demand; unfavourable for the shares",
    ),
    r"recall seen cutting profit ([\d.]+)%": (
        "Profit is expected to take a {x}% hit from the recall, which weighs on the earnings outlook",
        "The recall is seen shaving about {x}% off profit; a clear negative",
        "A profit-denting recall is bad news for holders",
    ),
    r"loses key customer; ([\d.]+)% of revenue at risk": (
        "A big customer walked, putting {x}% of revenue in doubt, which is bearish",
        "Key account lost and {x}% of the top line exposed; negative",
        "The departure of a key customer leaves a meaningful share of revenue at risk, and we would be cautious on the shares",
    ),
    r"faces regulatory probe; .* sales could drop ([\d.]+)%": (
        "A regulatory investigation could knock sales down by as much as {x}%, a real overhang for the stock",
        "Regulators are probing the company and sales may fall {x}%; we see this as a negative",
        "The regulatory probe is an unwelcome risk to sales and argues for caution",
    ),
    # --- uninformative news ----------------------------------------------------------------------------
    r"to present at the .* on (\w+ \d+)": (
        "The company is due to present at an investor conference on {x}; a scheduling item with no bearing on the view",
        "Conference appearance scheduled, neutral for the stock",
    ),
    r"declares quarterly dividend of \$([\d.]+) per share": (
        "A quarterly dividend of ${x} per share was declared, routine and neutral",
        "Regular quarterly payout of ${x} a share; no change to our stance",
    ),
    r"names new chief financial officer, effective (\w+ \d+)": (
        "A new finance chief has been named, taking up the role on {x}; a personnel change we regard as neutral",
        "CFO appointment announced; neutral",
    ),
    r"opens office in (\w+) with \d+ employees": (
        "A new office in {x} is a small footprint expansion that should not move the shares",
    ),
    r"opens office in \w+ with (\d+) employees": (
        "The company opened an office with {x} employees, too small to matter for the investment case",
    ),
    # --- analyst actions --------------------------------------------------------------------------------
    r"upgrades .* to Buy; raises price target to \$([\d.]+)": (
        "The broker moved to Buy and lifted its target to ${x}, a bullish call",
        "Upgrade to Buy, with the price target raised to ${x}; positive for sentiment",
        "A sell-side upgrade to a Buy rating alongside a higher target supports the bull case",
    ),
    r"downgrades .* to Sell; cuts price target to \$([\d.]+)": (
        "The broker cut its rating to Sell and lowered the target to ${x}, a bearish view",
        "Downgraded to Sell, price target trimmed to ${x}; negative",
        "A move to Sell with a reduced target is a vote of no confidence from the analyst",
    ),
    r"reiterates Hold on .*; price target \$([\d.]+) \(\+": (
        "The analyst kept a Hold rating with a ${x} target, a neutral stance that leaves our view unchanged",
        "Hold reiterated (target ${x}); neutral",
    ),
    r"reiterates Hold on .*; price target \$[\d.]+ \(\+([\d.]+)% vs": (
        "The Hold rating was maintained and the target sits {x}% above the close, so the analyst sees modest upside at best",
    ),
    r"reiterates Hold on .*; price target \$[\d.]+ \(-([\d.]+)% vs": (
        "A Hold was reiterated with a target {x}% below the last close, hardly an endorsement",
        "Rating kept at Hold; the target is {x}% under the close, a neutral-to-cautious signal",
    ),
    # --- earnings -------------------------------------------------------------------------------------
    r"EPS \$[\d.]+ vs \$[\d.]+ expected \(\+([\d.]+)% surprise\)": (
        "EPS beat consensus by {x}%, a good print",
        "The quarter's earnings came in {x}% ahead of the estimate, which we see as positive",
        "Earnings per share exceeded expectations by a {x}% margin; supportive",
    ),
    r"EPS \$[\d.]+ vs \$[\d.]+ expected \(-([\d.]+)% surprise\)": (
        "EPS missed the estimate by {x}%, a weak result",
        "Earnings per share undershot the forecast by {x}%, which is disappointing",
        "A {x}% shortfall against expected EPS is a negative for the shares",
    ),
    r"EPS \$([\d.]+) vs \$[\d.]+ expected \(\+": (
        "Reported EPS of ${x} was ahead of what was expected, an encouraging quarter",
    ),
    r"EPS \$([\d.]+) vs \$[\d.]+ expected \(-": (
        "Reported EPS of ${x} fell short of expectations, a disappointing quarter",
    ),
    # --- insider trades -------------------------------------------------------------------------------
    r"CEO \w+ \w+ buys ([\d,]+) shares": (
        "The chief executive bought {x} shares, a vote of confidence from the top",
        "CEO purchase of {x} shares; insiders are buying, mildly bullish",
    ),
    r"CFO \w+ \w+ buys .*\(\$([\d.]+) million\)": (
        "The finance chief bought about ${x} million of stock, a positive signal from someone who knows the numbers",
    ),
    r"Director \w+ \w+ buys ([\d,]+) shares": (
        "A board member bought {x} shares, which we read as a modestly positive sign",
    ),
    r"(?:COO|CTO) \w+ \w+ buys ([\d,]+) shares": (
        "A senior officer bought {x} shares, a small show of faith in the business",
    ),
    r"(?:CEO|CFO|COO|CTO|Director) \w+ \w+ sells ([\d,]+) shares": (
        "An insider sold {x} shares, a mildly negative signal though such sales are often for personal reasons",
        "Insider selling of {x} shares; a small negative",
    ),
    r"CEO \w+ \w+ sells .*\(\$([\d.]+) million\)": (
        "The chief executive sold around ${x} million of stock, a modest negative for sentiment",
    ),
    r"(?:CFO|COO|CTO|Director) \w+ \w+ sells .*\(\$([\d.]+) million\)": (
        "An insider disposed of roughly ${x} million worth of shares; slightly bearish",
    ),
    # --- macro ----------------------------------------------------------------------------------------
    r"US CPI rose ([\d.]+)% in \w+": (
        "US consumer prices were up {x}% on the month, a macro backdrop rather than a stock-specific signal",
        "CPI +{x}% m/m; inflation context only",
    ),
    r"US CPI fell ([\d.]+)% in \w+": (
        "US consumer prices eased {x}% over the month, background for the wider market rather than a call on this name",
    ),
    r"annual inflation at ([\d.]+)%": (
        "Headline inflation is running at {x}% a year, part of the macro picture with no direct read on this stock",
    ),
    r"Fed cuts policy rate by 25 bp to ([\d.]+)%": (
        "The Fed trimmed rates by a quarter point to {x}% as growth slows, which cuts both ways for equities",
        "Rate cut of 25 bp to {x}% on slower growth; macro context",
    ),
    r"Fed raises policy rate by 25 bp to ([\d.]+)%": (
        "The Fed hiked by 25 bp to {x}% on strong demand, a mixed backdrop for equities",
        "Policy rate up a quarter point to {x}%; context rather than a signal for the stock",
    ),
    r"Fed holds policy rate at ([\d.]+)%": (
        "The central bank left rates unchanged at {x}% and sees balanced risks, a steady backdrop",
        "Fed on hold at {x}%; no change to the macro picture",
    ),
    # --- technical lines: of these only the moving-average items are cited by the rows' theses; the text of
    # such an item does not say whether the close is above or below it, so the paraphrases restate the
    # level and take no side --------------------------------------------------------------------------
    r"SMA\(5\) ([\d.]+)": (
        "The five-day simple moving average is at {x}, a short-term reference point for the price",
    ),
    r"SMA\(20\) ([\d.]+)": (
        "The 20-day moving average sits at {x}; where the price trades against it is the trend test",
        "20-day SMA at {x}, a level to watch",
    ),
    r"SMA\(50\) ([\d.]+)": (
        "The 50-day average is {x}, the medium-term trend marker",
    ),
    r"EMA\(12\) ([\d.]+)": (
        "The 12-day exponential average stands at {x}, a short-term trend gauge",
    ),
    r"EMA\(26\) ([\d.]+)": (
        "26-day EMA at {x}; a reference level rather than a signal on its own",
    ),
}

# real headlines (a distinctive substring) -> one honest paraphrase each
REAL_2: dict[str, tuple[str, ...]] = {
    "Apple announces record holiday Q1 2020 earnings": (
        "Apple reported record holiday-quarter earnings for Q1 2020 on revenue of $91.8 billion, a strong print",),
    "Apple Snaps Up AI Startup Inductiv": (
        "Apple bought the AI start-up Inductiv while analysts lifted their price targets on store reopenings, a supportive mix",),
    "iPhone Sales Jump 160%": (
        "Apple's China sales are on a recovery path, with iPhone sales up 160% in April according to a report; encouraging",),
    "Gates Foundation Buys Up Amazon Apple Twitter Stock": (
        "The Gates Foundation has been buying Apple stock, a modest vote of confidence",),
    "Apple hits record high as RBC upgrade": (
        "An RBC upgrade that sees room for an 11% climb pushed Apple to a record high; bullish",),
    "Apple stock rockets to record as": (
        "Apple shares hit a record after earnings described as amazingly strong calmed fears about pandemic iPhone demand, "
        "a clearly positive read",),
    "Tech Stocks Lead Wall Street Higher On Upbeat Earnings News": (
        "Tech names led the market higher on upbeat earnings, a constructive backdrop",),
    "Apple Briefly No. 1": (
        "A surge in the shares briefly made Apple the world's biggest company, ahead of Saudi Aramco, which speaks to "
        "strong momentum",),
    "Dow Recoils After Terrifying Coronavirus Outbreak": (
        "The Dow pulled back as the coronavirus outbreak reached US soil, a risk-off backdrop",),
    "Dow Tumbles After U.S. Coronavirus Escalation": (
        "Stocks tumbled as the US coronavirus situation escalated, a negative for the market",),
    "Wedbush Ups Apple Price Target To Street-High $600": (
        "Wedbush lifted its Apple target to a Street-high $600 ahead of what it calls a transformational iPhone cycle; bullish",),
    "Cowen raises AAPL price target to industry-high $530": (
        "Cowen raised its Apple price target to an industry-high $530, a positive signal",),
    "Apple Wins The Race To $2 Trillion Market Cap": (
        "Apple won the race to a $2 trillion market value, a sign of how strong the momentum is",),
    "Apple Must Face Sex-Bias Lawsuit": (
        "A court ruled that Apple must face a sex-bias lawsuit over a janitorial contract, a minor negative",),
    "AAPL stock drops almost 6%": (
        "Apple shares dropped almost 6%, on course for their worst day since March; bearish",),
    "Sells Off After iPhone Sales Miss Estimates": (
        "Apple sold off after iPhone sales missed estimates, a negative read",),
    "Tumbles 4% on Falling iPhone Sales": (
        "The stock fell 4% on declining iPhone sales, a slowdown in China and a lack of guidance, which is bearish",),
    "Q4 Earnings Beat Services Boost Sales Growth": (
        "Apple's Q4 earnings beat, with services lifting sales growth; a positive",),
    "Apple will pay $113 million over investigation": (
        "Apple is to pay $113 million over the investigation into slowed iPhones, a modest negative",),
    "Apple Sued For $200M In EU": (
        "Apple faces a $200M suit in the EU over claims it slowed iPhones to hide battery problems, a negative",),
    "Pete Najarian Says He's": (
        "Pete Najarian says he is loading up on Apple, a bullish endorsement",),
    "Apple Chief Security Officer Indicted": (
        "Apple's chief security officer was indicted over allegedly bribing officials with iPads to get gun permits, "
        "a reputational negative",),
    "Could Fail To Meet iPhone 12 Holiday Demand": (
        "According to a report, a chip shortage could leave Apple unable to meet holiday demand for the iPhone 12, "
        "a risk to sales",),
    "Microsoft tried a 4-day workweek in Japan": (
        "Microsoft's trial of a four-day week in Japan saw productivity jump 40%, a small positive",),
    "Apple Gets $200 Bull Case Target From Wedbush": (
        "Wedbush set a $200 bull-case target for Apple on what it sees as the strongest product cycle since 2014; bullish",),
    "Morgan Stanley raises AAPL target to $136": (
        "Morgan Stanley raised its Apple target to $136, saying the iPhone 12 revs the growth engine, a bullish call",),
    "Dow Rallies 600 Points After Italy": (
        "The Dow rallied 600 points as Italy turned a corner against COVID-19, a supportive backdrop",),
    "Gets a Buy Rating from Wedbush": (
        "Wedbush rates Apple a Buy, which supports the shares",),
    "3 Reasons to Buy the Apple": (
        "A MarketBeat piece gives three reasons to buy the Apple pullback, a bullish take",),
}

# honest conclusions: (decision direction they fit, text); general words, no specific fact
CONCLUSIONS_2: tuple[tuple[int, str], ...] = (
    (1, "On balance the evidence favours the upside: the supportive items are more numerous and weightier than "
        "the cautionary ones, so we come down on the bullish side for the next week."),
    (1, "The constructive signals dominate and the negatives look minor by comparison; a positive stance is "
        "warranted."),
    (1, "Weighing everything cited, the case for owning the shares is stronger than the case against, so we "
        "lean bullish."),
    (-1, "The balance of the evidence is unfavourable: the concerns outweigh the encouraging points, and we "
         "would lean bearish over the coming week."),
    (-1, "Too much of the record argues against the stock for the positives to carry the day; we turn "
         "bearish."),
    (-1, "Setting the good against the bad, the negatives clearly weigh more, so the prudent call is to "
         "reduce exposure."),
    (0, "The signals pull in different directions and neither side is convincing, so we stay neutral."),
    (0, "Nothing in the evidence is decisive; the supportive and the cautionary items broadly offset each "
        "other, which argues for a neutral position."),
    (0, "With mixed evidence and no clear edge either way, holding a neutral view seems the sensible "
        "course."),
    (1, "Overall the evidence tilts positive, and although a few items counsel caution, the weight of it "
        "supports a bullish call."),
)


def _swap(doc: Doc, cite: str, opinion: str) -> Doc:
    doc = doc.copy()
    for b in doc.bullets():
        if b.cite == cite:
            b.opinion = f"{opinion}, as the item says"
    return doc


def _flagged(text: str, row: dict) -> tuple[list[str], int]:
    """Why the thesis's opinions and conclusion invent (the reasons of its hallucinated bullets and
    statements; empty: none flagged), and how many of its bullets are read as misreadings."""
    rep = evidence_report(parse_thesis(text), evidence_index(row["evidence"]))
    return [r for c in (*rep.bullets, *rep.statements) if c.hallucinated for r in c.reasons], rep.misread


def _synthetic_cases(rows: list[dict], per: int = 3, table: dict[str, tuple[str, ...]] = SYNTHETIC,
                     kind: str = "opinion") -> list[tuple[str, str, dict, str]]:
    teacher, out, used = TemplateTeacher(seed=0), [], {}
    for i, row in enumerate(rows):
        doc = Doc.parse(teacher.write(row, seed=i)[0])
        items = {str(it["id"]): str(it.get("text", "")) for it in row["evidence"]}
        for b in doc.bullets():
            for pat, paraphrases in table.items():
                m = re.search(pat, items.get(b.cite, ""))
                if m is None:
                    continue
                for p in paraphrases:
                    if used.get(p, 0) < per:
                        used[p] = used.get(p, 0) + 1
                        text = p.format(x=m.group(1) if m.groups() else "")
                        out.append((kind, p, row, _swap(doc, b.cite, text).render()))
    return out


def _real_cases(rows: list[dict], table: dict[str, tuple[str, ...]] = REAL,
                kind: str = "opinion") -> list[tuple[str, str, dict, str]]:
    teacher, out = TemplateTeacher(seed=0), []
    for i, row in enumerate(rows):
        doc = Doc.parse(teacher.write(row, seed=i)[0])
        for it in row["evidence"]:
            for key, paraphrases in table.items():
                if key not in str(it.get("text", "")):
                    continue
                cite = str(it["id"])
                for p in paraphrases:
                    if any(b.cite == cite for b in doc.bullets()):
                        new = _swap(doc, cite, p)
                    else:
                        new = doc.copy()
                        for name, bullets in new.sections:
                            if name == it.get("section"):
                                bullets.append(Bullet(f"{p}, as the item says", str(it["text"]), cite))
                    out.append((kind, p, row, new.render()))
    return out


def _conclusion_cases(rows: list[dict], table: tuple[tuple[int, str], ...] = CONCLUSIONS,
                      kind: str = "conclusion") -> list[tuple[str, str, dict, str]]:
    from thesisgym.schema import DEFAULT_POSITIONS

    teacher, out = TemplateTeacher(seed=0), []
    for i, row in enumerate(rows[:12]):
        doc = Doc.parse(teacher.write(row, seed=i)[0])
        p = DEFAULT_POSITIONS.get(doc.decision, 0.0)
        d = 0 if p == 0 else (1 if p > 0 else -1)
        for want, text in table:
            if want == d:
                new = doc.copy()
                new.conclusion = text
                out.append((kind, text, row, new.render()))
    return out


_WORD_RULE = "reports what no evidence holds"


def measure(cases: list[tuple[str, str, dict, str]], show: bool = False) -> dict[str, tuple[int, int, int, int, int]]:
    """Per kind: (paraphrases, edited theses, flagged theses, flagged by the unsupported-word rule,
    theses with a bullet read as a misreading)."""
    res: dict[str, list] = {}
    for kind, p, row, text in cases:
        why, misread = _flagged(text, row)
        r = res.setdefault(kind, [set(), 0, 0, 0, 0])
        r[0].add(p)
        r[1] += 1
        r[2] += bool(why)
        r[3] += any(w.startswith(_WORD_RULE) for w in why)
        r[4] += misread > 0
        if (why or misread) and show:
            print(f"FLAGGED [{kind}] {p!r}: {'; '.join(why)[:300]}{' (misread)' if misread else ''}")
    return {k: (len(v[0]), v[1], v[2], v[3], v[4]) for k, v in res.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=60)
    ap.add_argument("--real-rows", type=int, default=24)
    ap.add_argument("--show", action="store_true")
    a = ap.parse_args(argv)
    syn = synthetic_rows(a.rows)
    groups = {"synthetic": _synthetic_cases(syn) + _conclusion_cases(syn)
              + _synthetic_cases(syn, table=HELDOUT, kind="held-out opinion (v4.17 tuning)")
              + _synthetic_cases(syn, table=HELDOUT_2, kind="v4.17 held-out opinion (v4.18 tuning)")
              + _synthetic_cases(syn, table=HELDOUT_3, kind="v4.18 held-out opinion")
              + _conclusion_cases(syn, table=CONCLUSIONS_2, kind="v4.18 held-out conclusion")}
    try:
        real = real_rows(a.real_rows) if a.real_rows else []
    except FileNotFoundError:
        real = []
    if real:
        groups["real"] = (_real_cases(real) + _conclusion_cases(real)
                          + _real_cases(real, table=REAL_2, kind="v4.18 held-out opinion")
                          + _conclusion_cases(real, table=CONCLUSIONS_2, kind="v4.18 held-out conclusion"))
    for name, cases in groups.items():
        for kind, (n_p, n_t, n_f, n_w, n_m) in measure(cases, a.show).items():
            print(f"{name} {kind}: {n_p} paraphrases, {n_t} edited theses, flagged {n_f} ({n_f / max(n_t, 1):.1%}), "
                  f"by the unsupported-word rule {n_w} ({n_w / max(n_t, 1):.1%}), "
                  f"read as a misreading {n_m} ({n_m / max(n_t, 1):.1%})")


if __name__ == "__main__":
    sys.exit(main())
