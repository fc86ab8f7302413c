"""The normalization table: written text -> what the server says, with the options that apply.
Read by tests/container/test_normalize.py (the function itself) and by the server tests of both
backends (routes/openai/test_kokoro_fastapi.py on the real onnx weights,
backends/test_torch_backend.py on the generated checkpoint), which check /dev/phonemize's
normalized text and phonemes against it."""

# (options as sent in normalization_options, input, expected spoken text); {} = the defaults.
CASES: list[tuple[dict, str, str]] = [
    # money
    ({}, "It costs $5.50.", "It costs five dollars and fifty cents."),
    ({}, "$1 and $0.99", "one dollar and ninety-nine cents"),
    ({}, "A $1,000 fee.", "A one thousand dollars fee."),
    ({}, "$2.5 million", "two point five million dollars"),
    ({}, "£3.25 or €20", "three pounds and twenty-five pence or twenty euros"),
    # numbers with separators, decimals, negatives, percentages, ordinals, fractions
    ({}, "1,234,567 people", "one million two hundred thirty-four thousand five hundred sixty-seven people"),
    ({}, "Pi is 3.14.", "Pi is three point one four."),
    ({}, "It was -5 outside.", "It was minus five outside."),
    ({}, "Up 45% and 3.5%", "Up forty-five percent and three point five percent"),
    ({}, "the 1st, 22nd and 103rd", "the first, twenty-second and one hundred third"),
    ({}, "Add 1/2 cup.", "Add one half cup."),
    ({}, "It costs 42 dollars.", "It costs forty-two dollars."),
    # dates and years
    ({}, "Due 12/01/2025.", "Due December first, twenty twenty-five."),
    ({}, "On 2025-12-01 we ship.", "On December first, twenty twenty-five we ship."),
    ({}, "December 1, 2025", "December first, twenty twenty-five"),
    ({}, "In 1999 and 2005.", "In nineteen ninety-nine and two thousand five."),
    ({}, "The 1990s", "The nineteen nineties"),
    # times
    ({}, "At 3:30 pm.", "At three thirty PM."),
    ({}, "At 10:00 sharp", "At ten o'clock sharp"),
    ({}, "Open 9am to 5 PM", "Open nine AM to five PM"),
    ({}, "The train left at 14:05.", "The train left at fourteen oh five."),
    # URLs, emails, phone numbers
    ({}, "Visit https://example.com now.", "Visit example dot com now."),
    ({}, "See www.example.org/docs", "See w w w dot example dot org slash docs"),
    ({}, "Mail john.doe@example.com today.", "Mail john dot doe at example dot com today."),
    ({}, "Call (555) 123-4567.", "Call five five five, one two three, four five six seven."),
    ({}, "Call +1 555-123-4567", "Call plus one, five five five, one two three, four five six seven"),
    # abbreviations
    ({}, "Dr. Smith met Mr. Jones at 3 p.m. today.",
     "Doctor Smith met Mister Jones at three PM today."),
    ({}, "Mrs. Lee lives on Main St. in St. Louis.", "Missus Lee lives on Main Street in Saint Louis."),
    ({}, "Apples, pears, etc.", "Apples, pears, et cetera."),
    ({}, "Fruit, e.g. apples", "Fruit, for example apples"),
    ({}, "Room No. 5", "Room number five"),
    # optional plurals and symbols
    ({}, "Check the file(s).", "Check the files."),
    ({}, "R&D + QA", "R and D plus QA"),
    # units: off by default (Kokoro-FastAPI's default), on when asked
    ({}, "A 10KB file", "A 10KB file"),
    ({"unit_normalization": True}, "A 10KB file, 5 km away at 60 mph.",
     "A ten kilobytes file, five kilometers away at sixty miles per hour."),
    ({"unit_normalization": True}, "1 kg and 3.5GB", "one kilogram and three point five gigabytes"),
    # each switch off
    ({"normalize": False}, "Dr. Smith paid $5.50.", "Dr. Smith paid $5.50."),
    ({"url_normalization": False}, "Visit https://example.com now.", "Visit https://example.com now."),
    ({"email_normalization": False}, "Mail a@example.com", "Mail a@example.com"),
    ({"phone_normalization": False, "replace_remaining_symbols": False}, "Call 555-123-4567",
     "Call five hundred fifty-five-one hundred twenty-three-four thousand five hundred sixty-seven"),
    ({"optional_pluralization_normalization": False}, "Check the file(s).", "Check the file(s)."),
    ({"replace_remaining_symbols": False}, "R&D", "R&D"),
    # issue 47's readings. AM/PM as one word: espeak says the letters ("A M"); "a m" is "uh em".
    ({}, "Open at 10:30 a.m. daily.", "Open at ten thirty AM daily."),
    ({}, "Wake at 9am.", "Wake at nine AM."),
    ({}, "It starts at 10:30 AM.", "It starts at ten thirty AM."),
    # roman numerals (the roman library parses them): a count after Chapter/War/..., a regnal
    # ordinal after a name; one-letter numerals after a name stay (Malcolm X, the pronoun I)
    ({}, "Read Chapter IV.", "Read Chapter four."),
    ({}, "Henry VIII had six wives.", "Henry the eighth had six wives."),
    ({}, "After World War II ended.", "After World War two ended."),
    ({}, "Malcolm X spoke.", "Malcolm X spoke."),
    ({}, "A Type C cable, Grade C, Part I.", "A Type C cable, Grade C, Part one."),
    ({}, "Louis XIV and Star Wars Episode IV.", "Louis the fourteenth and Star Wars Episode four."),
    # a four-digit number is a count unless a year is meant
    ({}, "We have 2048 files.", "We have two thousand forty-eight files."),
    ({}, "It has 1234 users.", "It has one thousand two hundred thirty-four users."),
    ({}, "Born in 1984 in Ohio.", "Born in nineteen eighty-four in Ohio."),
    ({}, "From 1990 to 2010 it grew.", "From nineteen ninety to twenty ten it grew."),
    # ranges and versions
    ({}, "Pick 5-10 items.", "Pick five to ten items."),
    ({}, "It takes 3-4 days.", "It takes three to four days."),
    ({}, "Version 2.0.1 is out.", "Version two point zero point one is out."),
    # slashes: a month/day, a split, "per", and "over" for the rest
    ({}, "Due 12/25.", "Due December twenty-fifth."),
    ({}, "A 50/50 chance.", "A fifty-fifty chance."),
    ({}, "Only $5/month.", "Only five dollars per month."),
    ({}, "Ratio 100/200.", "Ratio one hundred over two hundred."),
    # local phone numbers and service numbers, digit by digit
    ({}, "Call 555-1234.", "Call five five five, one two three four."),
    ({}, "Call 911 now.", "Call nine one one now."),
    # markup, emoji and scripts an English voice cannot read: dropped (the route warns for scripts)
    ({}, '<speak>Hello <break time="1s"/> there</speak>', "Hello there"),
    ({}, "Pizza 🍕 and coffee ☕ now.", "Pizza and coffee now."),
    ({}, "Hello 你好，世界。 there.", "Hello there."),
    # inline IPA is left for G2P, untouched by the rules
    ({}, "Say [Kokoro](/kˈOkəɹO/) 2 times.", "Say [Kokoro](/kˈOkəɹO/) two times."),
]
