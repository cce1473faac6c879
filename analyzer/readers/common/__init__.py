"""What every reader needs, whatever the format: tolerant CSV (``csvfile``), small JSON files and
msgspec pieces (``jsonfile``), the spill stage for rows finished at the end of a file (``spill``),
one helper per cell meaning (``cells``) and the step of a moment (``steps``)."""
