"""The templates of the synthetic conversations (:mod:`arbormem.bench.synth`): the
everyday topics with their news, questions, answers and details, and the small
talk around them (greetings, reactions, topic switches, closers)."""

from __future__ import annotations

from dataclasses import dataclass

from arbormem.bench.synth_words import _items, _words

# -- templates ----------------------------------------------------------------------------
# A topic is (news, [(question, (answers...)), ...], details). Slots in braces; "my_..."
# and "your_..." read the persona of the speaker and of the other person.


@dataclass(frozen=True)
class _Topic:
    name: str
    news: tuple[str, ...]
    qa: tuple[tuple[str, tuple[str, ...]], ...]
    details: tuple[str, ...]


def _topic(name: str, news: str, qa: str, details: str) -> _Topic:
    """Parse a topic from text: one template per line; a QA line is ``Q || A1 | A2 ...``."""
    pairs = []
    for line in qa.strip().splitlines():
        question, _, answers = line.partition("||")
        pairs.append((question.strip(), _items(answers)))
    return _Topic(
        name,
        tuple(s.strip() for s in news.strip().splitlines()),
        tuple(pairs),
        tuple(s.strip() for s in details.strip().splitlines()),
    )


TOPICS: tuple[_Topic, ...] = (
    _topic(
        "work",
        """
        Work has been {adj} this week, we're trying to finish {project} before {date}.
        I finally presented {project} to the whole team {when_past} and it went {adj_good}.
        My manager asked me to lead {project}, which is exciting but a lot of pressure.
        We had {num} people call in sick {when_past}, so I ended up covering two shifts.
        I've been a {my_job} at {my_employer} for {years} years now and I'm starting to want a change.
        There's a big reorganisation at {my_employer} and nobody knows what happens to our team.
        A client sent me a really kind thank-you note {when_past}, it made my whole week.
        The commute takes me {minutes} minutes now because of the roadworks on {street} Street.
        I applied for a {job} position at {employer} {when_past}, fingers crossed.
        Our team is trying out a four-day week starting on {date}.
        I spent {hours} hours in meetings today and got basically nothing else done.
        {friend} from work is leaving {when_future}, so we're organising a farewell lunch at {restaurant}.
        """,
        """
        How's the new job going? || Busier than I expected, but the people at {my_employer} are really kind. | Honestly it's {adj}, I'm still learning where everything is. | Pretty good! I'm shadowing a senior {my_job} for the first month.
        Do you ever get to work from home? || Two days a week, usually {weekday} and {weekday2}. | Not really, as a {my_job} I have to be on site most days.
        When is the deadline for {project}? || It's due on {date}, so we still have about {num} weeks. | Technically {when_future}, but I think it'll slip again.
        Are you still thinking about quitting? || A bit. If {employer} calls me back I'd seriously consider it. | Not anymore, the raise helped, I get an extra {price} a month now.
        How many people are on your team now? || {count} of us, plus two interns who started {when_past}. | Just {count}, which is tight for a project this size.
        What time do you usually finish? || Around {clock}, unless something breaks. | Officially at five, realistically closer to {clock}.
        """,
        """
        The worst part is the emails, I had {big} unread this morning.
        At least the coffee machine on our floor finally got fixed.
        I'm trying not to check messages after {clock} anymore.
        {friend} says I should ask for a raise, and I think they're right.
        We're hiring two more people, so it should get easier by {month}.
        My desk is next to the printer, so I hear every single page.
        {friend2} covered for me on {weekday} so I could leave at {clock}.
        We had a team lunch at {restaurant} and the {dish} was surprisingly good.
        The new system crashed {num} times on its first day, so that was fun.
        I've got a review with my manager on {date} and I'm a bit {feel} about it.
        """,
    ),
    _topic(
        "hobbies",
        """
        I signed up for a {hobby} class at the {place} and the first session is {when_future}.
        I've been getting really into {hobby} lately, I practise almost every evening.
        I finished my first {craft} {when_past}! It's a bit wonky but I'm proud of it.
        {friend} and I went {outdoor} {when_past} and it was {adj_good}.
        I picked up my {instrument} again after {years} years and my fingers hurt so much.
        I joined a {hobby} group that meets every {weekday} at {clock}.
        I bought a secondhand {gear} for {price}, which felt like a steal.
        """,
        """
        How long have you been doing {my_hobby}? || About {years} years, on and off. | Since {month} last year, a friend dragged me along and I got hooked.
        Is it hard to get started with {hobby}? || Not really, you need a {gear} and some patience. | The first few weeks are frustrating, but it gets fun quickly.
        What are you working on at the moment? || A {craft} for my {relative}'s birthday, it has to be done by {date}. | Nothing big, just practising the basics.
        Want to come along next time? || I'd love to! Just tell me what to bring. | Maybe, if it's not on a {weekday}, that's my busy day.
        """,
        """
        It's the only time in the week when I don't look at my phone.
        The teacher is a retired {job} who is incredibly patient with us.
        I've watched way too many tutorials at two in the morning.
        My {relative} thinks it's a phase, but it's been {num} months.
        There are {count} of us in the group and everyone is really welcoming.
        I've spent about {price} on supplies already, which is more than I'd like to admit.
        {friend} gave me a {gear} for my birthday and I've used it every {weekday} since.
        My goal is to make something good enough to give my {relative} by {month}.
        The {place} has a free session on the first {weekday} of the month.
        """,
    ),
    _topic(
        "travel",
        """
        We just booked flights to {city} for {month}! Only {price} return.
        I'm back from {num} days in {city}, I already miss the food.
        {friend} and I are planning a road trip from {city} to {city2} in {month}.
        My flight to {city} was delayed by {hours} hours, I slept on the airport floor.
        We stayed in a tiny apartment near the {landmark} and walked everywhere.
        I've wanted to visit {country} since I was a kid and it's finally happening {when_future}.
        The train from {city} to {city2} took {hours} hours but the views were {adj_good}.
        """,
        """
        Where are you going this summer? || Probably {country}, we're still comparing prices. | Nowhere far, maybe a long weekend in {city}.
        How was {city}? || {adj_good}! The old town was packed but the food made up for it. | Honestly it was {adj_bad}, it rained the whole time.
        Did you get to see the {landmark}? || Yes, we went early on the {ordinal} day before the crowds. | No, it was closed for repairs, which was a shame.
        How much did the trip cost in the end? || Around {bigprice} for the two of us, flights included. | More than planned, probably {bigprice} all in.
        Who are you travelling with? || My {relative} and {friend}, first time we've gone away together. | Just me this time, I like travelling solo.
        """,
        """
        I still need to renew my passport before {date}.
        We found a little place called {restaurant} and ate there three nights in a row.
        I packed way too many clothes again, half of them never left the suitcase.
        The hotel upgraded us for free because it was our anniversary.
        We got lost for an hour trying to find the bus station.
        The locals were so friendly, one family invited us in for {dish}.
        The best thing we ate was {dish} from a stall near the {landmark}.
        We walked about {steps} steps a day, my feet are still recovering.
        {friend} knows {city} really well and sent me a list of {count} places to try.
        It was {temp} degrees most days, so we did everything early in the morning.
        """,
    ),
    _topic(
        "food",
        """
        I tried making {dish} from scratch {when_past} and it actually turned out {adj_good}.
        There's a new place called {restaurant} near the {place}, their {dish} is unreal.
        I'm doing meal prep on Sundays now, {num} lunches ready for the week.
        We had {friend} over for dinner and I burned the {dish}, so we ordered {takeout} instead.
        I'm trying to eat less meat, so it's mostly {dish} and {dish2} at ours these days.
        My {relative} taught me the family recipe for {dish}, the trick is a pinch of {spice}.
        """,
        """
        What are you cooking tonight? || Probably {dish}, it's quick and I have everything. | Nothing, we're getting {takeout} because I'm too tired.
        Have you been to {restaurant} yet? || Yes! We went {when_past}, the {dish} was great but the service was slow. | Not yet, is it worth the hype?
        Can you send me that {dish} recipe? || Sure, I'll text it to you tonight, it takes about {minutes} minutes. | Of course, just go easy on the {spice}.
        Do you like spicy food? || Love it, the hotter the better. | Only a little, I can't handle much more than mild.
        """,
        """
        The secret is letting it rest for {minutes} minutes before serving.
        I bought way too many {ingredient} at the market, so expect {dish} all week.
        Dessert was {dessert}, which nobody had room for but we ate anyway.
        The bill came to {price} for the three of us, not bad at all.
        {friend} brought {dessert} and a bottle of {drink}, so it turned into a long evening.
        I doubled the {spice} this time and it was so much better.
        The queue outside {restaurant} was about {minutes} minutes long on a {weekday}.
        I'm going to try it with {ingredient} next time instead of meat.
        """,
    ),
    _topic(
        "family",
        """
        My {relative} is visiting {when_future} and staying for {num} nights.
        {my_kid} lost a tooth {when_past} and was so excited about the tooth fairy.
        We had a big lunch for my {relative}'s {age}th birthday, {count} people in one small flat.
        My parents are finally moving closer to us, they found a house near {city}.
        {my_partner} and I celebrated {years} years together {when_past}.
        My {relative} just had a baby, they've called the little one {babyname}.
        {my_kid} started at a new school and is already making friends.
        """,
        """
        How are your parents doing? || Pretty well, my dad just retired and doesn't know what to do with himself. | Okay, my mum had a small operation {when_past} but she's recovering.
        How old is {your_kid} now? || {my_kidage} already, it goes so fast. | Turning {my_kidage} in {month}, and planning the party already.
        Is {your_partner} coming to the party? || Yes, {my_partner} wouldn't miss it. | Probably not, work has been crazy for them.
        Are you seeing your family over the holidays? || Yes, we're all going to my {relative}'s place in {city}. | Not this year, flights were too expensive.
        """,
        """
        It was loud and chaotic and honestly I loved every minute.
        My {relative} still tells the same three stories at every dinner.
        We made them a photo album with pictures going back {years} years.
        {my_kid} insists on helping in the kitchen, so everything takes twice as long.
        My {relative} drove all the way from {city} for it, about {hours} hours each way.
        {my_partner} made {dish} for everyone and there were no leftovers.
        We're planning a trip to {country} with the whole family in {month}.
        {my_kid} wants a {pet} for their birthday, we'll see about that.
        """,
    ),
    _topic(
        "health",
        """
        I've had {symptom} since {when_past}, so I finally booked a doctor's appointment.
        I started going to the gym {times} times a week and I can feel the difference.
        I've been trying to be in bed by {clock} and I feel so much better.
        My physio gave me {num} exercises to do every morning for my back.
        I ran {km} km without stopping {when_past}, a personal best!
        I'm cutting down on coffee, I'm down to {num} cups a day.
        """,
        """
        How are you feeling now? || Much better, thanks. The medicine kicked in after a couple of days. | Still a bit rough, but improving.
        What did the doctor say? || Just rest and drink lots of water, nothing serious. | She wants to run some blood tests on {date} to be sure.
        Do you still go running in the mornings? || Yes, usually around {clock} before it gets hot. | Not since I hurt my knee, I swim instead now.
        How many hours do you sleep? || Maybe {num} on a good night. | Never enough, {num} if I'm lucky.
        """,
        """
        I'm trying to walk at least {steps} steps a day.
        My {relative} keeps sending me articles about vitamins.
        Stretching after work has made a huge difference for my neck.
        I didn't realise how little water I was drinking.
        The appointment is on {date} at {clock}, right in the middle of a work day.
        {friend} got me into {hobby}, which is great for stress.
        I've been off sugar for {num} weeks and I miss {dessert} every single day.
        My watch says I slept {num} hours but it felt like two.
        """,
    ),
    _topic(
        "tech",
        """
        My {device} died {when_past} and of course I hadn't backed anything up.
        I finally got a new {device} and I'm still figuring out the settings.
        I've been using a {app} for {num} weeks and it's actually helping.
        Our internet went down for {hours} hours and the whole house went quiet.
        I spent the whole evening trying to get the printer to connect to the wifi.
        I built a little website for my {relative}'s {business}, it took a weekend.
        """,
        """
        Which {device} did you end up buying? || The mid-range one, it was {price} on sale. | I didn't, I'm waiting for prices to drop in {month}.
        Do you know how to fix a slow {device}? || Try clearing the storage and restarting it, that usually helps. | Honestly, I'd take it to the repair shop near the {place}.
        Do you use any apps for {need}? || Yes, a {app}, it's free and pretty simple. | Just a notes app and a lot of willpower.
        """,
        """
        The battery lasts about {hours} hours, which is plenty for me.
        I had {big} photos on there, so that was a painful lesson.
        {friend} helped me set it all up over a video call.
        I've turned off almost all notifications and it's very peaceful.
        The repair shop quoted {price}, which is almost the price of a new one.
        My {relative} calls me every time their {device} shows a pop-up.
        I found an old {device} in a drawer with photos from {years} years ago.
        """,
    ),
    _topic(
        "pets",
        """
        {my_petname} chewed through my {thing} {when_past}, I can't even be mad.
        We're thinking about adopting a {pet} from the shelter on {street} Road.
        I took {my_petname} to the vet {when_past}, {petage} years old and perfectly healthy.
        {my_petname} learned to {trick} in just {num} days!
        Our neighbour's {pet} keeps sneaking into our garden to steal food.
        """,
        """
        How is {your_petname} doing? || {my_petname} is great, just getting lazy in old age. | Bit of an upset stomach this week, but better now.
        What breed is {your_petname}? || A mix, the shelter guessed half {breed}. | A {breed}, we got her from a breeder near {city}.
        Who looks after {your_petname} when you travel? || My {relative}, who spoils her rotten. | There's a pet sitter down the street who charges {price} a day.
        """,
        """
        She sleeps on my feet every night, which is cute until it's summer.
        The vet bill was {price}, so he'd better appreciate it.
        He barks at every delivery driver like they're a threat to the nation.
        We bought a fancy bed and she still prefers the cardboard box.
        {friend} looked after {my_petname} while we were in {city} and got completely attached.
        We walk to the {place} every morning, about {minutes} minutes each way.
        The food alone costs about {price} a month now.
        """,
    ),
    _topic(
        "sports",
        """
        Did you see the {team} game {when_past}? What a finish!
        I joined a {sport} team at work, we play every {weekday} at {clock}.
        We won our {sport} match {score}, first win of the season!
        I signed up for a {km} km charity run in {month}.
        I got tickets to see the {team} play on {date}.
        """,
        """
        Are you still playing {sport}? || Every week, though my knees are complaining. | I stopped in {month}, too busy with everything.
        Who do you think will win the league this year? || The {team}, if their captain stays fit. | No idea, but not my team, sadly.
        Do you want to come to the match with us? || Yes! How much are tickets? | Can't that day, but save me a seat next time.
        """,
        """
        We lost {score} but played much better than last time.
        The stadium was packed, about {big} people.
        My legs hurt for {num} days afterwards.
        {friend} scored twice and hasn't stopped talking about it.
        Training is on {weekday} evenings at the {place}, if you ever want to join.
        The ticket was {price}, but the view from our seats was worth it.
        """,
    ),
    _topic(
        "books",
        """
        I just finished {book} by {author}, I couldn't put it down.
        My book club picked {book} for {month} and I'm already behind.
        I'm reading about {subject} at the moment, it's fascinating.
        I found an old copy of {book} at a charity shop for {price}.
        I've read {num} books this year, trying to hit {count} by December.
        """,
        """
        What are you reading right now? || {book}, a slow start but it gets good. | Nothing, I'm in a bit of a reading slump.
        Would you recommend {book}? || Definitely, especially if you liked {author}'s other ones. | Only if you have patience, the middle drags.
        Do you prefer ebooks or paper? || Paper, I like to write in the margins. | Ebooks for travelling, paper at home.
        """,
        """
        The ending made me cry on the bus, which was embarrassing.
        I keep buying books faster than I can read them.
        {author} is doing a reading at the library on {date}.
        {friend} lent it to me {when_past} and I finished it in {num} days.
        It's set in {city} in the seventies, which I loved.
        I read it on the train to {city2}, about {hours} hours, and barely looked up.
        """,
    ),
    _topic(
        "music",
        """
        I saw {band} live at the {venue} {when_past}, they were {adj_good}.
        I've had the new album by {band} on repeat all week.
        I'm learning a song on the {instrument} for {friend}'s wedding.
        Tickets for {band} go on sale {when_future}, want to try with me?
        """,
        """
        What kind of music are you into lately? || Mostly {genre}, which surprised me. | A lot of {genre} for working and old {genre2} on weekends.
        Have you heard of {band}? || Yes! {friend} played them for me on a road trip. | No, what do they sound like?
        How long have you played the {instrument}? || Since I was {age}, with a long break in the middle. | Only about a year, I'm still pretty bad.
        """,
        """
        The crowd sang every word, it gave me goosebumps.
        We were stuck right behind the tallest person in the venue.
        I made a playlist for the trip, about {hours} hours of songs.
        The tickets were {price} each, but it was worth every penny.
        {friend} knows the drummer, so we got to say hi after the show.
        They're playing in {city} on {date} if you fancy a trip.
        """,
    ),
    _topic(
        "screen",
        """
        We started watching {show} and finished the whole first season in {num} days.
        I saw {film} at the cinema {when_past}, the ending was wild.
        There's an outdoor film screening at the {place} on {date}.
        """,
        """
        Have you seen {show}? || Only the first few episodes, is it worth continuing? | Yes, I loved it, the second season is even better.
        What should I watch this weekend? || Try {film}, it's funny and not too long. | {show}, if you like slow mysteries.
        """,
        """
        I fell asleep halfway through, so I'll have to watch it again.
        The soundtrack alone is worth it.
        {friend} recommended it {when_past} and I'm now completely hooked.
        We watched it with {count} people crammed on one sofa.
        Apparently the book is even better, {author} wrote it.
        """,
    ),
    _topic(
        "plans",
        """
        We're throwing a {event} for {friend} on {date}, can you make it?
        I'm thinking of having people over {when_future}, nothing fancy, just {dish} and games.
        {friend}'s {event} is on {date} at {restaurant}, starting at {clock}.
        We should finally do that picnic at the {place} before the weather turns.
        """,
        """
        Are you free {when_future}? || I think so, what did you have in mind? | Not in the afternoon, but I'm free after {clock}.
        What time should we meet? || How about {clock} at the {place}? | Let's say {clock}, I'll text you if I'm running late.
        Should I bring anything? || Maybe some {drink}, we have plenty of food. | Just yourself! And maybe a {dessert} if you feel like baking.
        """,
        """
        I'll make a group chat so everyone knows the plan.
        I booked a table for {count} just in case.
        If it rains we'll move everything to my place.
        {friend2} is bringing a {dessert}, so we're sorted for dessert.
        It's {price} each for food, and drinks are on us.
        Parking is a nightmare near the {place}, so take the bus if you can.
        """,
    ),
    _topic(
        "home",
        """
        I spent the whole morning trying to {errand} and the queue was endless.
        Our {appliance} broke {when_past}, the repair person can't come until {date}.
        We finally painted the {room}, it's a light {colour} now.
        I need to {errand} before {weekday} or I'll get a fine.
        The landlord is raising the rent by {price} a month from {month}.
        """,
        """
        Did you manage to {errand}? || Yes, finally, it only took {num} attempts. | No, the office closes at {clock} and I got there at {clock2}.
        How's the move going? || Slowly, there are boxes everywhere. | Almost done, we just need to sort out the {room}.
        """,
        """
        I made a list of {num} things to do and crossed off one.
        The hardware store on {street} Street has everything, by the way.
        It cost {price} in the end, more than I wanted to pay.
        My {relative} came over to help and we finished the {room} in {hours} hours.
        The neighbours have been drilling every {weekday} morning since {month}.
        We still haven't unpacked the last {num} boxes from the move.
        """,
    ),
    _topic(
        "money",
        """
        I bought {item} {when_past}, it was {price} down from {price2}.
        I'm trying to save {bigprice} by {month} for a new car.
        I cancelled {num} subscriptions I forgot I had, saving {price} a month.
        """,
        """
        Was it expensive? || About {price}, which is okay for what it is. | Way more than I planned, don't tell {my_partner}.
        Where did you get {item}? || At a market in {city}, the stall owner was lovely. | Online, it arrived in {num} days.
        """,
        """
        I've started writing down everything I spend, it's a bit scary.
        {my_partner} and I have a shared spreadsheet now, very romantic.
        Groceries alone were {price} this week, it's getting ridiculous.
        {friend} told me about a savings account with a better rate, so I switched.
        """,
    ),
    _topic(
        "learning",
        """
        I started an evening course in {subject} at the community college.
        My exam in {subject} is on {date} and I haven't started revising.
        I've been practising {language} every day for {num} weeks using a {app}.
        """,
        """
        How's the course going? || Tough but rewarding, the teacher used to be a {job}. | I'm behind on the homework, but I'll catch up.
        Why did you pick {subject}? || It might help me move into a {job} role. | Just curiosity, I always wanted to understand it better.
        """,
        """
        There are {count} of us in the class, mostly people changing careers.
        I study on the train, it's the only quiet hour I get.
        The course costs {bigprice} for the year, but work is paying half.
        We have a test every {weekday} and I've passed {num} in a row.
        {friend} is doing the same course in {city}, so we quiz each other.
        """,
    ),
    _topic(
        "outdoors",
        """
        The {plant} I planted in {month} finally came up!
        It's been {weather} here all week, I've barely left the house.
        We hiked the {trail} trail {when_past}, {km} km and a lot of uphill.
        """,
        """
        What's the weather like there? || {weather}, as usual for {month}. | Surprisingly nice, about {temp} degrees.
        What are you growing this year? || {plant}, some {herb} and way too many courgettes. | Just herbs on the balcony, no space for more.
        """,
        """
        The slugs ate half of my lettuce, I'm at war with them.
        We saw a deer right at the edge of the path.
        It took us {hours} hours and we stopped for {dish} at a pub near the {place}.
        My {relative} gave me some {plant} seedlings and they're doing really well.
        It's supposed to be {weather} again on {weekday}, so that's our plans ruined.
        """,
    ),
)

GREETINGS = _items(
    """Hey {you}!|Hi {you}, how's it going?|Morning!|Hey, long time no talk!|
    Hi! Hope your week is going okay.|Hey {you}, got a minute?|Hey there!|
    Good to hear from you, {you}.|Hiya!|Evening {you}!|Hi {you}, how have you been?"""
)
REACTIONS = _items(
    """Oh nice!|That's awesome.|No way!|Haha, classic.|Oh no, that sounds rough.|
    Wow, good for you.|Ugh, I feel that.|That's so cool, {you}.|Honestly, same.|Oh I love that.|
    Fair enough.|Wait, really?|Oh wow.|That makes sense.|Sounds {adj_good}!|Aw, that's sweet.|
    Ha, I can imagine.|Yikes.|Totally.|Good call.|I'm so happy for you!|Oh, interesting.|
    Lol, of course.|That's a lot, {you}.|Respect.|Oh, I didn't know that."""
)
SWITCHES = _items(
    """Oh, totally different subject.|Random thing, but guess what.|Anyway, other news!|
    Oh, that reminds me.|Speaking of which...|Okay, changing the topic for a second.|
    Before I forget!"""
)
FOLLOW_UPS = _items(
    """What about you?|How about you, {you}?|Any plans for {when_future}?|
    How's everything on your end?|Have you ever tried that?|What do you think?|
    Does that sound crazy?"""
)
CLOSERS = _items(
    """Anyway, I should get going. Talk soon, {you}!|Okay, gotta run, {you}. Catch you later!|
    Let's pick this up {when_future}, {you}.|Alright, dinner's ready, speak soon!|
    Thanks for the chat, {you}, this was nice.|Night, {you}! Sleep well.|
    I'll text you {when_future} then.|Right, back to work for me. Bye, {you}!|
    Say hi to {your_partner} from me!|Give {your_petname} a pat from me!"""
)
ASIDES = _items(
    """I'm writing this from the {place} in {my_city}, by the way.|{friend} says hi, by the way!|
    Sorry for the slow reply, {you}, today has been {adj}.|
    I'm on the bus to {city2}, so excuse the typos.|
    My {relative} is visiting until {weekday}, so I'm a bit distracted.|
    It's {weather} in {my_city} again today.|
    I've had {num} coffees today and it's not even {clock}.|
    I just got back from the {place} with {friend}.|
    Still recovering from {friend}'s {event} on {weekday}.|
    The kids are finally asleep, so I have {minutes} minutes before {my_partner} gets home.|
    Sorry, {my_petname} just walked across the keyboard.|
    I'm stuck in a queue at the {place}, {num} people ahead of me.|
    I'm meeting {friend} at {clock}, so I'll be quick.|We're off to {city2} on {weekday}, by the way.|
    I'm so {feel} today, {you}, no idea why.|Did you get my message about {friend}'s {event}?|
    My {relative} says hi, {you}!|Remind me to tell you about {friend} and the {thing} later.|
    Oh, and {friend} got the {job} job!|I'm eating {dish} at my desk as we speak.|
    {friend} and {friend2} are coming over at {clock}, so I can't be long.|
    Also, happy {weekday}, {you}!|I can't believe {friend}'s {event} is already on {date}."""
)
SHORT = _items(
    """Haha yes, exactly what I was thinking.|Same here, honestly.|Ha, that's so true.|
    I know, right? It's ridiculous.|Okay, that made me laugh.|Oh no, poor you.|
    Yes! Finally some good news.|Hmm, I'm not so sure about that."""
)

#: Slots that keep their value for a whole topic segment (the things being talked about).
_STICKY = frozenset(
    _words(
        """friend friend2 relative restaurant dish dish2 city city2 country landmark hobby craft
        instrument pet breed team book author band show film event project item subject plant
        trail sport device app employer job gear outdoor errand appliance room business venue
        babyname genre genre2 language need trick thing street"""
    )
)
